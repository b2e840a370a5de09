"""The deployment's small entities: repositories, rules and policies, advisories, scans and dependencies.

Everything here is a function of the seed and the counts, except absolute times, which hang off ``now``.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from typing import Any

from .. import timefmt
from . import vocabulary as vocab

DAY = 86400.0
MODES = ("MODE_MONITOR", "MODE_COMMENT", "MODE_BLOCK", "MODE_DISABLED")
LANGUAGES = ("python", "javascript", "typescript", "java", "go", "ruby")
LANGUAGE_ECOSYSTEMS = {
    "python": ("pypi",), "javascript": ("npm",), "typescript": ("npm",), "java": ("maven",),
    "go": ("gomod",), "ruby": ("gem",),
}
REPOSITORY_ID_BASE = 40001
SCAN_ID_BASE = 5000001
DEPENDENCY_ID_BASE = 700001
RULE_ID_BASE = 610001
POLICY_IDS = ("2101", "2102")
#: Repositories whose index is this modulo 5 have ``develop`` as their default branch (the primary stays
#: ``main``/``master``), so ``ref=_default`` and the primary branch select different findings there.
DEVELOP_DEFAULT = 2
DEVELOP = "develop"


@dataclass(frozen=True)
class Repository:
    """A repository; also the project of the same name."""

    id: int
    name: str
    url: str
    language: str
    primary_branch: str
    branches: tuple[str, ...]
    visibility: str
    tags: tuple[str, ...]
    created_at: float
    diff_scan: bool
    full_scan: bool
    has_dependency_path_scan: bool
    commits: dict[str, str] = field(default_factory=dict)
    default_branch: str = ""


@dataclass(frozen=True)
class CodeRule:
    """A code rule with its place in each policy (``modes`` maps policy id to mode)."""

    id: str
    spec: vocab.RuleSpec
    path: str
    source: str
    rulesets: tuple[str, ...]
    modes: dict[str, str]
    last_change_at: float
    last_change_by: str | None


@dataclass(frozen=True)
class Advisory:
    """A supply-chain advisory against one package version."""

    identifier: str
    rule_name: str
    ecosystem: str
    package: str
    version: str
    fix_version: str | None
    severity: str
    summary: str
    cwe: str
    epss: float


@dataclass(frozen=True)
class Policy:
    """A rule policy of the deployment."""

    id: str
    name: str
    slug: str
    is_default: bool
    product_type: str = "PRODUCT_TYPE_SAST"


@dataclass
class World:
    """All non-finding entities of one generated deployment."""

    now: float
    repositories: list[Repository]
    rules: list[CodeRule]
    policies: list[Policy]
    advisories: list[Advisory]
    scans: list[dict[str, Any]]
    dependencies: list[dict[str, Any]]
    scan_ids_by_repo: dict[int, list[int]]


def _hex(rng: random.Random, digits: int) -> str:
    return f"{rng.getrandbits(digits * 4):0{digits}x}"


def _repositories(rng: random.Random, count: int, now: float) -> list[Repository]:
    repos = []
    for index in range(count):
        base = vocab.REPO_NAMES[index % len(vocab.REPO_NAMES)]
        suffix = f"-{index // len(vocab.REPO_NAMES) + 1}" if index >= len(vocab.REPO_NAMES) else ""
        org = vocab.ORGS[0] if index % 4 else vocab.ORGS[index // 4 % len(vocab.ORGS)]
        name = f"{org}/{base}{suffix}"
        primary = "master" if index % 4 == 3 else "main"
        features = tuple(rng.sample(vocab.FEATURE_BRANCHES, rng.randint(1, 3)))
        branches = (primary, *features)
        tags = (f"team:{rng.choice(vocab.TEAMS)}", rng.choice(vocab.TIERS))
        commits = {branch: _hex(rng, 40) for branch in branches}
        default = primary
        if index % 5 == DEVELOP_DEFAULT:
            # the code host's default branch differs from the primary branch the service reports on (a
            # git-flow repository); its commit is derived from the name, so no draw shifts the other data
            default = DEVELOP
            if DEVELOP not in branches:
                branches = (*branches, DEVELOP)
                commits[DEVELOP] = hashlib.sha1(f"{name}:{DEVELOP}".encode(), usedforsecurity=False).hexdigest()
        repos.append(Repository(
            id=REPOSITORY_ID_BASE + index,
            name=name,
            url=f"https://github.com/{name}",
            language=LANGUAGES[index % len(LANGUAGES)],
            primary_branch=primary,
            branches=branches,
            visibility="public" if index % 5 == 4 else "private",
            tags=tags if index % 6 else (),
            created_at=now - rng.uniform(200, 1500) * DAY,
            diff_scan=rng.random() < 0.8,
            full_scan=rng.random() < 0.6,
            has_dependency_path_scan=rng.random() < 0.5,
            commits=commits,
            default_branch=default,
        ))
    return repos


def _rules(rng: random.Random, count: int, now: float) -> list[CodeRule]:
    catalogue = list(vocab.RULE_CATALOGUE)
    rng.shuffle(catalogue)
    rules = []
    for index in range(count):
        spec = catalogue[index % len(catalogue)]
        generation = index // len(catalogue)
        path = spec.path if generation == 0 else f"{spec.path}-v{generation + 1}"
        in_second = index % 2 == 0
        modes = {POLICY_IDS[0]: MODES[index % 4]}
        if in_second:
            modes[POLICY_IDS[1]] = MODES[(index // 2 + 1) % 4]
        changed = rng.random() < 0.3
        rules.append(CodeRule(
            id=str(RULE_ID_BASE + index),
            spec=spec,
            path=path,
            source=("SOURCE_COMMUNITY", "SOURCE_PRO", "SOURCE_PRO", "SOURCE_CUSTOM")[index % 4],
            rulesets=tuple(rng.sample(vocab.RULESETS, rng.randint(0, 2))),
            modes=modes,
            last_change_at=now - rng.uniform(1, 300) * DAY,
            last_change_by=rng.choice(vocab.PEOPLE)[2] if changed else None,
        ))
    return rules


def _advisories(rng: random.Random) -> list[Advisory]:
    advisories = []
    for ecosystem, packages in vocab.ECOSYSTEMS.items():
        for package, version, fix in packages:
            for _ in range(rng.randint(1, 2)):
                if rng.random() < 0.6:
                    identifier = f"CVE-{rng.randint(2019, 2024)}-{rng.randint(1000, 49999)}"
                else:
                    identifier = "GHSA-" + "-".join(_hex(rng, 4) for _ in range(3))
                summary = rng.choice(vocab.SCA_SUMMARIES).format(pkg=package)
                advisories.append(Advisory(
                    identifier=identifier,
                    rule_name=f"ssc-{_hex(rng, 8)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 12)}",
                    ecosystem=ecosystem,
                    package=package,
                    version=version,
                    fix_version=fix if rng.random() < 0.9 else None,
                    severity=rng.choices(("low", "medium", "high", "critical"), (10, 40, 35, 15))[0],
                    summary=summary,
                    cwe=rng.choice(("CWE-1321", "CWE-400", "CWE-94", "CWE-20", "CWE-918", "CWE-22")),
                    epss=round(max(0.00043, 0.97 * rng.random() ** 4), 5),
                ))
    return advisories


def _scan_meta(rng: random.Random, repo: Repository, branch: str, commit: str, scan_id: int,
               full: bool) -> dict[str, Any]:
    author, username, email = rng.choice(vocab.PEOPLE)
    pr_id = None if full else rng.randint(100, 4000)
    return {
        "branch": branch,
        "commit": commit,
        "config": "semgrep ci",
        "repo_url": repo.url,
        "ci_job_url": f"{repo.url}/actions/runs/{8000000000 + scan_id}",
        "repository": repo.name,
        "commit_title": {"value": rng.choice(vocab.COMMIT_TITLES)},
        "pull_request_id": pr_id,
        "pull_request_title": None if pr_id is None else {"value": rng.choice(vocab.COMMIT_TITLES)},
        "commit_author_name": author,
        "commit_author_image_url": f"https://avatars.example.com/u/{username}",
        "commit_author_email": email,
        "commit_author_username": username,
        "pull_request_author_username": None if pr_id is None else rng.choice(vocab.PEOPLE)[1],
        "pull_request_author_image_url": None if pr_id is None else "https://avatars.example.com/u/reviewer",
    }


def _scans(rng: random.Random, count: int, repos: list[Repository], now: float,
           scan_duration: float) -> list[dict[str, Any]]:
    statuses = ["SCAN_STATUS_RUNNING", "SCAN_STATUS_COMPLETED", "SCAN_STATUS_ERROR", "SCAN_STATUS_NEVER_FINISHED"]
    scans = []
    for index in range(count):
        status = statuses[index] if index < 4 else rng.choices(statuses, (8, 72, 12, 8))[0]
        repo = repos[index % len(repos)]
        full = rng.random() < 0.35
        branch = repo.primary_branch if full or rng.random() < 0.3 else rng.choice(repo.branches)
        commit = _hex(rng, 40)
        scan_id = SCAN_ID_BASE + index
        products = ["PRODUCT_SAST"]
        for product, share in (("PRODUCT_SCA", 0.7), ("PRODUCT_SECRETS", 0.5), ("PRODUCT_AI_SAST", 0.15)):
            if rng.random() < share:
                products.append(product)
        duration = round(rng.uniform(20, 900), 3)
        finish_after = None
        final_status = "SCAN_STATUS_ERROR" if rng.random() < 0.2 else "SCAN_STATUS_COMPLETED"
        final_exit = rng.choice((2, 3, 4, 7, 123)) if final_status == "SCAN_STATUS_ERROR" else rng.choice((0, 1))
        if status == "SCAN_STATUS_RUNNING":
            started = now - rng.uniform(0, 0.5) * scan_duration
            finish_after = scan_duration
        elif status == "SCAN_STATUS_NEVER_FINISHED":
            started = now - rng.uniform(1.5 / 24, 25) * DAY
        else:
            started = now - rng.uniform(0.05, 29) * DAY
        started = timefmt.to_micros(started)
        completed = exit_code = total_time = None
        if status in ("SCAN_STATUS_COMPLETED", "SCAN_STATUS_ERROR"):
            completed = started + duration
            total_time = duration
            exit_code = rng.choice((0, 1)) if status == "SCAN_STATUS_COMPLETED" else rng.choice((2, 3, 4, 7, 123))
        code = rng.randint(0, 60) if exit_code in (0, 1) else 0
        sca = rng.randint(0, 40) if exit_code in (0, 1) and "PRODUCT_SCA" in products else 0
        secrets = rng.randint(0, 5) if exit_code in (0, 1) and "PRODUCT_SECRETS" in products else 0
        scans.append({
            "id": scan_id, "repository_id": repo.id, "branch": branch, "commit": commit,
            "started_at": started, "completed_at": completed, "status": status, "exit_code": exit_code,
            "is_full_scan": full, "products": "|" + "|".join(products) + "|",
            "code_count": code, "sca_count": sca, "secrets_count": secrets, "total_time": total_time,
            "has_logs": status != "SCAN_STATUS_NEVER_FINISHED", "finish_after": finish_after,
            "final_status": final_status, "final_exit_code": final_exit,
            "meta": _scan_meta(rng, repo, branch, commit, scan_id, full),
        })
    return scans


def _dependencies(rng: random.Random, count: int, repos: list[Repository],
                  advisories: list[Advisory]) -> list[dict[str, Any]]:
    vulnerable = [(a.ecosystem, a.package, a.version) for a in advisories]
    deps = []
    seen: set[tuple[Any, ...]] = set()
    for index in range(count):
        repo = repos[index % len(repos)]
        ecosystem = rng.choice(LANGUAGE_ECOSYSTEMS[repo.language])
        if index < len(vulnerable) * 2:
            ecosystem, package, version = vulnerable[index % len(vulnerable)]
        else:
            package, low, high = rng.choice(vocab.ECOSYSTEMS[ecosystem])
            version = rng.choice((low, high))
            if rng.random() < 0.5:
                package = f"{package}-{rng.choice(('utils', 'core', 'types', 'plugin', 'compat'))}"
                version = f"{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 20)}"
        licenses = rng.sample(vocab.LICENSES, 2 if rng.random() < 0.1 else 1)
        lockfile = rng.choice(vocab.LOCKFILES[ecosystem])
        repo, lockfile = _unused_place(seen, repos, repo, lockfile, vocab.LOCKFILES[ecosystem], ecosystem, package,
                                       version)
        deps.append({
            "id": DEPENDENCY_ID_BASE + index,
            "name": package,
            "version": version,
            "ecosystem": ecosystem,
            "lockfile_path": lockfile,
            "licenses": licenses,
            "repository_id": repo.id,
            "transitivity": rng.choices(("direct", "transitive"), (35, 65))[0],
        })
    return deps


def _unused_place(seen: set[tuple[Any, ...]], repos: list[Repository], repo: Repository, lockfile: str,
                  lockfiles: list[str] | tuple[str, ...], ecosystem: str, package: str,
                  version: str) -> tuple[Repository, str]:
    """A repository and lockfile where ``package`` ``version`` is not listed yet (a lockfile lists a package
    version once; the real service, which gives dependencies no id, tells them apart by exactly that place).
    Tried in a fixed order, without drawing from the random generator, so the rest of the data is unchanged."""
    candidates = [(repo, lockfile)] + [(repo, other) for other in lockfiles] + [
        (other_repo, other) for other_repo in repos for other in lockfiles]
    for place_repo, place_lockfile in candidates:
        key = (place_repo.id, place_lockfile, ecosystem, package, version)
        if key not in seen:
            seen.add(key)
            return place_repo, place_lockfile
    return repo, lockfile  # every place taken (more copies than repositories times lockfiles): a repeat


def generate_world(*, seed: int, repositories: int, scans: int, rules: int, dependencies: int,
                   now: float, scan_duration: float) -> World:
    """Build every entity except findings, deterministically from ``seed``."""
    rng = random.Random(f"{seed}:world")
    repos = _repositories(rng, max(1, repositories), now)
    code_rules = _rules(rng, max(1, rules), now)
    advisories = _advisories(rng)
    scan_rows = _scans(rng, scans, repos, now, scan_duration)
    by_repo: dict[int, list[int]] = {}
    for scan in scan_rows:
        by_repo.setdefault(scan["repository_id"], []).append(scan["id"])
    policies = [
        Policy(POLICY_IDS[0], "Default Policy", "default-policy", True),
        Policy(POLICY_IDS[1], "Strict PR Policy", "strict-pr-policy", False),
    ]
    return World(
        now=now,
        repositories=repos,
        rules=code_rules,
        policies=policies,
        advisories=advisories,
        scans=scan_rows,
        dependencies=_dependencies(rng, dependencies, repos, advisories),
        scan_ids_by_repo=by_repo,
    )


def render_rule(rule: CodeRule, policy_id: str) -> dict[str, Any]:
    """Rule JSON as listed in a policy (reference 2.8)."""
    spec = rule.spec
    body: dict[str, Any] = {
        "id": rule.id,
        "path": rule.path,
        "category": spec.category,
        "confidence": f"CONFIDENCE_{spec.confidence.upper()}",
        "severity": f"SEVERITY_{spec.severity.upper()}",
        "source": rule.source,
        "policyMode": rule.modes[policy_id],
        "languages": [spec.language],
        "technologies": [spec.technology],
        "cweCategories": [spec.cwe] if spec.cwe else [],
        "owaspCategories": [spec.owasp] if spec.owasp else [],
        "vulnerabilityClass": [spec.vulnerability_class],
        "rulesets": list(rule.rulesets),
        "registryMaintainer": "acme" if rule.source == "SOURCE_CUSTOM" else "semgrep",
        "lastChangeAt": timefmt.render(rule.last_change_at, timefmt.MILLIS_Z),
        "url": f"https://registry.example.com/r/{rule.path}",
    }
    if rule.last_change_by:
        body["lastChangeBy"] = rule.last_change_by
    return body
