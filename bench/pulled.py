"""The issue types the benchmark pulls (offset-paginated code and supply chain), spelled by ``client/vocabulary.py``.

Importing it loads ``findings_provider.client`` (httpx, pydantic): the children that time the product's import
(``extract_product.py``, ``naive_baseline.py``) do not import it; the others load the product anyway.
"""

from __future__ import annotations

from findings_provider.client.vocabulary import IssueType

ISSUE_TYPES: tuple[str, ...] = (IssueType.SAST.value, IssueType.SCA.value)
