"""Developer tools: the one stack launcher (``stack.py``) used by the demo (``demo.py``) and the e2e tests."""
