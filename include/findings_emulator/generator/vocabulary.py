"""Word lists the generator draws realistic names, rules, advisories and texts from."""

from __future__ import annotations

from typing import NamedTuple

ORGS = ("acme", "acme-labs", "acme-infra")

REPO_NAMES = (
    "payments-api", "checkout-web", "identity-service", "billing-worker", "mobile-gateway", "search-indexer",
    "notifications", "admin-console", "data-pipeline", "ledger-core", "partner-portal", "audit-trail",
    "inventory-sync", "pricing-engine", "fraud-detector", "docs-site", "cli-tools", "terraform-modules",
    "helm-charts", "shared-libs", "auth-proxy", "reporting-ui", "event-bus", "media-uploader",
)

FEATURE_BRANCHES = (
    "develop", "feature/login-rework", "feature/async-exports", "fix/session-timeout", "release/2024.06",
    "feature/new-checkout", "chore/bump-deps", "feature/sso-okta", "hotfix/rate-limit",
)

TEAMS = ("payments", "identity", "platform", "data", "frontend", "mobile", "security")
TIERS = ("tier-1", "tier-2", "tier-3")

PEOPLE = (
    ("Ada Lovelace", "ada", "ada@acme.example"), ("Grace Hopper", "ghopper", "grace@acme.example"),
    ("Linus Berg", "lberg", "linus@acme.example"), ("Mia Chen", "mchen", "mia@acme.example"),
    ("Omar Haddad", "ohaddad", "omar@acme.example"), ("Sofia Rossi", "srossi", "sofia@acme.example"),
    ("Kenji Sato", "ksato", "kenji@acme.example"), ("Priya Nair", "pnair", "priya@acme.example"),
)

COMMIT_TITLES = (
    "Fix redirect after login", "Add pagination to invoice export", "Bump lodash from 4.17.20 to 4.17.21",
    "Refactor session store", "Validate webhook signatures", "Use parameterised queries in reports",
    "Add retry to payment capture", "Remove unused feature flag", "Upgrade Spring Boot to 3.2.5",
    "Harden CSP headers", "Cache pricing rules", "Split user service into modules",
)

FILE_PATHS = {
    "python": ("app/api/views.py", "app/db/queries.py", "services/billing/tasks.py", "app/auth/session.py",
               "scripts/export_reports.py", "app/utils/crypto.py"),
    "javascript": ("src/routes/checkout.js", "src/server/render.js", "lib/api/client.js",
                   "src/components/Profile.jsx", "server/middleware/auth.js", "src/utils/template.js"),
    "typescript": ("src/app/orders/orders.service.ts", "src/api/handlers/upload.ts", "src/lib/http.ts",
                   "apps/web/pages/account.tsx"),
    "java": ("src/main/java/com/acme/payments/ReportController.java",
             "src/main/java/com/acme/auth/TokenService.java",
             "src/main/java/com/acme/ledger/EntryRepository.java"),
    "go": ("internal/handlers/upload.go", "pkg/crypto/hash.go", "cmd/server/main.go", "internal/db/store.go"),
    "ruby": ("app/controllers/accounts_controller.rb", "app/models/invoice.rb", "lib/tasks/import.rake"),
    "generic": ("config/settings.yaml", "deploy/values.yaml", ".github/workflows/ci.yml", "docker/Dockerfile"),
}


class RuleSpec(NamedTuple):
    """One code rule of the catalogue."""

    path: str
    category: str
    vulnerability_class: str
    cwe: str
    owasp: str
    severity: str
    confidence: str
    language: str
    technology: str
    message: str


RULE_CATALOGUE: tuple[RuleSpec, ...] = (
    RuleSpec("python.flask.security.injection.tainted-sql-string", "security", "SQL Injection",
             "CWE-89: Improper Neutralization of Special Elements used in an SQL Command ('SQL Injection')",
             "A03:2021 - Injection", "high", "high", "python", "flask",
             "Detected user input used to manually construct a SQL string. This is usually bad practice "
             "because manual construction could accidentally result in a SQL injection."),
    RuleSpec("python.django.security.injection.raw-html-format", "security", "Cross-Site-Scripting (XSS)",
             "CWE-79: Improper Neutralization of Input During Web Page Generation ('Cross-site Scripting')",
             "A03:2021 - Injection", "medium", "medium", "python", "django",
             "Detected user input flowing into a manually constructed HTML string. You may be accidentally "
             "bypassing secure methods of rendering HTML by manually constructing HTML."),
    RuleSpec("python.lang.security.audit.subprocess-shell-true", "security", "Command Injection",
             "CWE-78: Improper Neutralization of Special Elements used in an OS Command",
             "A03:2021 - Injection", "high", "medium", "python", "python",
             "Found 'subprocess' function with 'shell=True'. This is dangerous because this call will spawn "
             "the command using a shell process, which makes command injection possible."),
    RuleSpec("python.lang.security.deserialization.avoid-pickle", "security", "Insecure Deserialization",
             "CWE-502: Deserialization of Untrusted Data", "A08:2021 - Software and Data Integrity Failures",
             "medium", "low", "python", "python",
             "Avoid using pickle, which is known to lead to code execution vulnerabilities when used to "
             "deserialize untrusted data."),
    RuleSpec("python.requests.security.disabled-cert-validation", "security", "Mishandled Sensitive Information",
             "CWE-295: Improper Certificate Validation", "A07:2021 - Identification and Authentication Failures",
             "high", "high", "python", "requests",
             "Certificate verification has been explicitly disabled. This permits insecure connections to "
             "insecure servers."),
    RuleSpec("python.jwt.security.unverified-jwt-decode", "security", "Improper Authentication",
             "CWE-287: Improper Authentication", "A07:2021 - Identification and Authentication Failures",
             "critical", "high", "python", "pyjwt",
             "Detected JWT token decoded with 'verify=False'. This bypasses any integrity checks for the token."),
    RuleSpec("python.lang.best-practice.open-never-closed", "best-practice", "Other", "CWE-404: Improper "
             "Resource Shutdown or Release", "", "low", "medium", "python", "python",
             "File creation in an open() call is never closed; use a context manager."),
    RuleSpec("python.boto3.security.hardcoded-token", "security", "Hard-coded Secrets",
             "CWE-798: Use of Hard-coded Credentials", "A07:2021 - Identification and Authentication Failures",
             "high", "medium", "python", "boto3",
             "A hard-coded credential was detected. It is not recommended to store credentials in source code."),
    RuleSpec("javascript.express.security.audit.xss.direct-response-write", "security",
             "Cross-Site-Scripting (XSS)",
             "CWE-79: Improper Neutralization of Input During Web Page Generation ('Cross-site Scripting')",
             "A03:2021 - Injection", "medium", "medium", "javascript", "express",
             "Detected directly writing to a Response object from user-defined input. This bypasses any HTML "
             "escaping and may expose your application to a Cross-site-scripting (XSS) vulnerability."),
    RuleSpec("javascript.express.security.injection.tainted-sql-string", "security", "SQL Injection",
             "CWE-89: Improper Neutralization of Special Elements used in an SQL Command ('SQL Injection')",
             "A03:2021 - Injection", "high", "high", "javascript", "express",
             "Detected user input used to manually construct a SQL string."),
    RuleSpec("javascript.lang.security.audit.prototype-pollution.prototype-pollution-loop", "security",
             "Prototype Pollution", "CWE-915: Improperly Controlled Modification of Dynamically-Determined "
             "Object Attributes", "A08:2021 - Software and Data Integrity Failures", "medium", "low",
             "javascript", "javascript",
             "Possibility of prototype polluting function detected. By adding or modifying attributes of an "
             "object prototype, it is possible to create attributes that exist on every object."),
    RuleSpec("javascript.jsonwebtoken.security.jwt-hardcode", "security", "Hard-coded Secrets",
             "CWE-798: Use of Hard-coded Credentials", "A07:2021 - Identification and Authentication Failures",
             "high", "high", "javascript", "jsonwebtoken",
             "A hard-coded credential was detected. It is not recommended to store credentials in source code."),
    RuleSpec("javascript.browser.security.insecure-document-method", "security", "Cross-Site-Scripting (XSS)",
             "CWE-79: Improper Neutralization of Input During Web Page Generation ('Cross-site Scripting')",
             "A03:2021 - Injection", "medium", "low", "javascript", "browser",
             "User controlled data in methods like innerHTML, outerHTML or document.write is an anti-pattern "
             "that can lead to XSS vulnerabilities."),
    RuleSpec("javascript.lang.correctness.useless-assign", "correctness", "Other", "CWE-563: Assignment to "
             "Variable without Use", "", "low", "high", "javascript", "javascript",
             "The value assigned here is overwritten before it is read."),
    RuleSpec("typescript.react.security.audit.react-dangerouslysetinnerhtml", "security",
             "Cross-Site-Scripting (XSS)",
             "CWE-79: Improper Neutralization of Input During Web Page Generation ('Cross-site Scripting')",
             "A03:2021 - Injection", "medium", "medium", "typescript", "react",
             "Detection of dangerouslySetInnerHTML from non-constant definition. This can inadvertently expose "
             "users to cross-site scripting (XSS) attacks."),
    RuleSpec("typescript.nestjs.security.audit.nestjs-open-redirect", "security", "Open Redirect",
             "CWE-601: URL Redirection to Untrusted Site ('Open Redirect')", "A01:2021 - Broken Access Control",
             "medium", "medium", "typescript", "nestjs",
             "Untrusted user input in a redirect can lead to an open redirect vulnerability."),
    RuleSpec("typescript.angular.security.audit.angular-domsanitizer", "security", "Cross-Site-Scripting (XSS)",
             "CWE-79: Improper Neutralization of Input During Web Page Generation ('Cross-site Scripting')",
             "A03:2021 - Injection", "low", "low", "typescript", "angular",
             "Detected the use of bypassSecurityTrust methods on user input, which disables Angular sanitizing."),
    RuleSpec("java.spring.security.injection.tainted-sql-string", "security", "SQL Injection",
             "CWE-89: Improper Neutralization of Special Elements used in an SQL Command ('SQL Injection')",
             "A03:2021 - Injection", "critical", "high", "java", "spring",
             "User data flows into this manually-constructed SQL string. User data can be safely inserted into "
             "SQL strings using prepared statements or an object-relational mapper (ORM)."),
    RuleSpec("java.spring.security.audit.spring-csrf-disabled", "security", "Cross-Site Request Forgery (CSRF)",
             "CWE-352: Cross-Site Request Forgery (CSRF)", "A01:2021 - Broken Access Control", "medium", "high",
             "java", "spring",
             "CSRF protection is disabled for this configuration. This is a security risk."),
    RuleSpec("java.lang.security.audit.xxe.documentbuilderfactory-disallow-doctype-decl-missing", "security",
             "XML Injection", "CWE-611: Improper Restriction of XML External Entity Reference",
             "A05:2021 - Security Misconfiguration", "high", "medium", "java", "xml",
             "DOCTYPE declarations are enabled for this DocumentBuilderFactory. This is vulnerable to XML "
             "external entity attacks."),
    RuleSpec("java.lang.security.audit.crypto.weak-hash", "security", "Cryptographic Issues",
             "CWE-328: Use of Weak Hash", "A02:2021 - Cryptographic Failures", "medium", "high", "java", "java",
             "Detected MD5 or SHA1 hash algorithm which is considered insecure."),
    RuleSpec("java.lang.security.audit.object-deserialization", "security", "Insecure Deserialization",
             "CWE-502: Deserialization of Untrusted Data", "A08:2021 - Software and Data Integrity Failures",
             "high", "low", "java", "java",
             "Found object deserialization using ObjectInputStream. Deserializing entire Java objects is "
             "dangerous because malicious actors can create Java object streams with unintended consequences."),
    RuleSpec("java.lang.best-practice.hardcoded-conditional", "best-practice", "Other",
             "CWE-571: Expression is Always True", "", "low", "medium", "java", "java",
             "This if statement will always have the same behavior and is therefore unnecessary."),
    RuleSpec("go.lang.security.audit.crypto.use-of-md5", "security", "Cryptographic Issues",
             "CWE-328: Use of Weak Hash", "A02:2021 - Cryptographic Failures", "medium", "high", "go", "go",
             "Detected MD5 hash algorithm which is considered insecure. MD5 is not collision resistant."),
    RuleSpec("go.lang.security.audit.net.unescaped-data-in-url", "security", "Cross-Site-Scripting (XSS)",
             "CWE-79: Improper Neutralization of Input During Web Page Generation ('Cross-site Scripting')",
             "A03:2021 - Injection", "medium", "low", "go", "net/http",
             "Found a formatted template string passed to 'template.URL()'. This bypasses escaping."),
    RuleSpec("go.gorm.security.audit.gorm-dangerous-methods-usage", "security", "SQL Injection",
             "CWE-89: Improper Neutralization of Special Elements used in an SQL Command ('SQL Injection')",
             "A03:2021 - Injection", "high", "medium", "go", "gorm",
             "Detected usage of dangerous method which can lead to SQL injection."),
    RuleSpec("go.lang.security.audit.net.use-tls", "security", "Mishandled Sensitive Information",
             "CWE-319: Cleartext Transmission of Sensitive Information", "A02:2021 - Cryptographic Failures",
             "medium", "high", "go", "net/http",
             "Found an HTTP server without TLS. Use 'http.ListenAndServeTLS' instead."),
    RuleSpec("go.lang.correctness.permissions.file-permission", "correctness", "Improper Authorization",
             "CWE-276: Incorrect Default Permissions", "A01:2021 - Broken Access Control", "low", "medium",
             "go", "go", "Expect permissions to be 0600 or less for os.Chmod, os.Mkdir, os.OpenFile."),
    RuleSpec("ruby.rails.security.audit.xss.avoid-raw", "security", "Cross-Site-Scripting (XSS)",
             "CWE-79: Improper Neutralization of Input During Web Page Generation ('Cross-site Scripting')",
             "A03:2021 - Injection", "medium", "medium", "ruby", "rails",
             "'raw()' bypasses HTML escaping. If external data can reach here, this exposes your application "
             "to cross-site scripting (XSS) attacks."),
    RuleSpec("ruby.rails.security.injection.tainted-sql-string", "security", "SQL Injection",
             "CWE-89: Improper Neutralization of Special Elements used in an SQL Command ('SQL Injection')",
             "A03:2021 - Injection", "high", "high", "ruby", "rails",
             "Detected user input used to manually construct a SQL string."),
    RuleSpec("ruby.lang.security.model-attr-accessible", "security", "Mass Assignment",
             "CWE-915: Improperly Controlled Modification of Dynamically-Determined Object Attributes",
             "A08:2021 - Software and Data Integrity Failures", "medium", "low", "ruby", "rails",
             "Checks for dangerous permitted attributes that can lead to mass assignment vulnerabilities."),
    RuleSpec("generic.nginx.security.missing-ssl-version", "security", "Cryptographic Issues",
             "CWE-326: Inadequate Encryption Strength", "A02:2021 - Cryptographic Failures", "low", "medium",
             "generic", "nginx", "This server configuration is missing the 'ssl_protocols' directive."),
    RuleSpec("yaml.github-actions.security.run-shell-injection", "security", "Command Injection",
             "CWE-78: Improper Neutralization of Special Elements used in an OS Command",
             "A03:2021 - Injection", "critical", "high", "generic", "github-actions",
             "Using variable interpolation `${{...}}` with `github` context data in a `run:` step could allow "
             "an attacker to inject their own code into the runner."),
    RuleSpec("yaml.kubernetes.security.privileged-container", "security", "Improper Authorization",
             "CWE-250: Execution with Unnecessary Privileges", "A05:2021 - Security Misconfiguration", "high",
             "high", "generic", "kubernetes",
             "Container or pod is running in privileged mode. This grants the container the equivalent of root "
             "capabilities on the host machine."),
    RuleSpec("dockerfile.security.missing-user", "security", "Improper Authorization",
             "CWE-269: Improper Privilege Management", "A04:2021 - Insecure Design", "medium", "high",
             "generic", "dockerfile",
             "By not specifying a USER, a program in the container may run as 'root'."),
    RuleSpec("terraform.aws.security.aws-s3-bucket-public-read", "security", "Improper Authorization",
             "CWE-284: Improper Access Control", "A01:2021 - Broken Access Control", "high", "medium",
             "generic", "terraform", "S3 bucket has a public-read ACL; anyone can list and read its objects."),
    RuleSpec("python.lang.performance.unnecessary-list-copy", "performance", "Other", "", "", "low", "high",
             "python", "python", "Calling list() on a list creates an unnecessary copy."),
    RuleSpec("javascript.lang.maintainability.no-unused-function", "maintainability", "Other", "", "", "low",
             "medium", "javascript", "javascript", "This function is declared but never used."),
    RuleSpec("java.spring.security.audit.spring-actuator-fully-enabled", "security",
             "Mishandled Sensitive Information", "CWE-200: Exposure of Sensitive Information to an Unauthorized "
             "Actor", "A01:2021 - Broken Access Control", "high", "high", "java", "spring",
             "Spring Boot Actuator is fully enabled. This exposes sensitive endpoints such as /actuator/env."),
    RuleSpec("python.django.security.audit.csrf-exempt", "security", "Cross-Site Request Forgery (CSRF)",
             "CWE-352: Cross-Site Request Forgery (CSRF)", "A01:2021 - Broken Access Control", "medium",
             "medium", "python", "django",
             "Detected usage of @csrf_exempt, which indicates that there is no CSRF token set for this route."),
)

RULESETS = ("p/default", "p/owasp-top-ten", "p/secure-defaults", "p/ci", "p/security-audit")

COMPONENTS = (
    ("high", "payments"), ("high", "user authentication"), ("medium", "user data"), ("low", "infrastructure"),
    ("low", "test code"), ("medium", "file handling"),
)

AUTOTRIAGE_REASONS = {
    "true_positive": (
        "The input reaches the sink without sanitisation: the request parameter is concatenated into the "
        "statement on the highlighted line and no validation happens on the path from the handler."
    ),
    "false_positive": (
        "The flagged value is a constant defined in the module configuration and never derived from user "
        "input; the dangerous path the rule describes cannot be reached in this code."
    ),
}

ECOSYSTEMS = {
    "npm": (("lodash", "4.17.20", "4.17.21"), ("express", "4.17.1", "4.19.2"), ("axios", "0.21.1", "1.6.0"),
            ("jsonwebtoken", "8.5.1", "9.0.0"), ("minimist", "1.2.5", "1.2.6"), ("tar", "6.1.0", "6.2.1"),
            ("semver", "7.5.1", "7.5.2"), ("ws", "7.4.5", "7.5.10"), ("follow-redirects", "1.14.7", "1.15.6")),
    "pypi": (("requests", "2.25.1", "2.31.0"), ("django", "3.2.4", "3.2.25"), ("pyyaml", "5.3.1", "5.4"),
             ("jinja2", "2.11.2", "3.1.4"), ("urllib3", "1.26.4", "1.26.18"), ("cryptography", "3.3.1", "42.0.4"),
             ("pillow", "8.1.0", "10.3.0"), ("flask", "1.1.2", "2.2.5")),
    "maven": (("org.apache.logging.log4j:log4j-core", "2.14.1", "2.17.1"),
              ("com.fasterxml.jackson.core:jackson-databind", "2.9.10", "2.12.7.1"),
              ("org.springframework:spring-web", "5.3.18", "5.3.33"), ("org.yaml:snakeyaml", "1.30", "2.0")),
    "gomod": (("golang.org/x/net", "0.7.0", "0.23.0"), ("github.com/gin-gonic/gin", "1.7.0", "1.9.1"),
              ("google.golang.org/grpc", "1.53.0", "1.56.3")),
    "gem": (("rack", "2.2.3", "2.2.8.1"), ("nokogiri", "1.11.1", "1.16.5"), ("rails", "6.1.3", "6.1.7.7")),
}

LOCKFILES = {
    "npm": ("package-lock.json", "yarn.lock", "web/package-lock.json"),
    "pypi": ("poetry.lock", "requirements.txt", "services/api/requirements.txt"),
    "maven": ("pom.xml", "services/ledger/pom.xml"),
    "gomod": ("go.sum",),
    "gem": ("Gemfile.lock",),
}

LICENSES = ("MIT", "Apache-2.0", "BSD-3-Clause", "ISC", "BSD-2-Clause", "MPL-2.0", "GPL-3.0-only",
            "LGPL-2.1-or-later", "Unlicense")

SCA_SUMMARIES = (
    "Prototype pollution in {pkg}", "Regular expression denial of service in {pkg}", "Remote code execution "
    "in {pkg}", "Improper input validation in {pkg}", "Server-side request forgery in {pkg}", "Path traversal "
    "in {pkg}", "Denial of service via crafted payload in {pkg}", "Information exposure in {pkg}",
)

REACHABLE_CONDITIONS = (
    "Only reachable when the application parses untrusted YAML with the full loader.",
    "Reachable if the vulnerable function is called with user-controlled options.",
    "Exploitable only when the server follows redirects to untrusted hosts.",
)

SECRET_TYPES = (
    ("AWS", "generic.secrets.security.detected-aws-access-key-id-value"),
    ("GitHub", "generic.secrets.security.detected-github-token"),
    ("Slack", "generic.secrets.security.detected-slack-token"),
    ("Stripe", "generic.secrets.security.detected-stripe-api-key"),
    ("GCP", "generic.secrets.security.detected-gcp-service-account"),
    ("Generic", "generic.secrets.security.detected-generic-secret"),
    ("PrivateKey", "generic.secrets.security.detected-private-key"),
)

TICKET_PREFIX = "SEC"
#: AI-detected findings (``issue_type=ai_sast``): rule name suffix, vulnerability class, CWE, ``ai_impact``.
AI_DETECTIONS = (
    ("idor", "Insecure Direct Object Reference", "CWE-639: Authorization Bypass Through User-Controlled Key",
     "Any signed-in user can read or change another customer's records by changing the id in the request."),
    ("missing-authorization", "Improper Authorization", "CWE-862: Missing Authorization",
     "An unauthenticated caller can trigger an administrative action that should be limited to operators."),
    ("business-logic", "Business Logic Flaw", "CWE-840: Business Logic Errors",
     "A customer can apply the same discount code repeatedly and pay less than the order's price."),
)
TRACKER_URL = "https://tracker.example.com/browse"
