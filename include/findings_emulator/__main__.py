"""``python -m findings_emulator``: the same as the ``findings-emulator`` command."""

from .cli import main

if __name__ == "__main__":
    main()
