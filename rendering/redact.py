"""Keep credentials out of reports: tokens, keys and kubeconfig secrets become [REDACTED]."""

import re

PATTERNS = [
    # "Authorization: Bearer <token>", "bearer=<token>"
    (re.compile(r"(?i)(bearer[\s=:]+)[A-Za-z0-9._~+/=-]{8,}"), r"\1[REDACTED]"),
    # AWS access key ids and the secret that usually travels with them
    (re.compile(r"\b(AKIA|ASIA)[A-Z0-9]{16}\b"), "[REDACTED-AWS-KEY-ID]"),
    (re.compile(r"(?i)(aws_secret_access_key|aws_session_token|secretAccessKey|sessionToken)"
                r"([\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"), r"\1\2[REDACTED]"),
    # kubeconfig and JSON/YAML secrets: token, password, client-key-data, certificate data
    (re.compile(r"(?i)((?:token|password|passwd|secret|client-key-data|client-certificate-data|"
                r"certificate-authority-data)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"), r"\1[REDACTED]"),
    # PEM blocks
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
     "[REDACTED-PRIVATE-KEY]"),
]


def redact(text: str) -> str:
    for pattern, repl in PATTERNS:
        text = pattern.sub(repl, text)
    return text
