"""Keeping secrets out of everything envlock writes or prints: one module, one rule set.

Every string that leaves the process — manifest (TOML and JSON), console, ``libs`` output,
cache files — passes :func:`redact_text` (or, for one URL, :func:`redact_url`); variables pass
:func:`redact_variable`.  The rules:

* **URL user-info**, whatever characters the password holds (``"``, spaces, ``@``, ``/``):
  ``https://user:p w"d@host/x`` → ``https://host/x``.  ``http(s)``/``ftp`` lose all of it (a
  GitHub token is often the *user* part); ``ssh``/``git`` keep a bare user name
  (``ssh://git@host``, scp-like ``git@host:path``) — RFC 3986 §3.2.1 user-info.
* **Query credentials**: parameters named ``token``, ``sig``, ``signature``, ``access_token``,
  ``key``, ``X-Amz-*`` (AWS SigV4 presigned URLs), ``X-Goog-*`` (GCS V4 signed URLs), Azure SAS
  ``sig``/``se``-bearing ``sig``, and any name :func:`secret_name` matches.  :func:`redact_url`
  drops them; in free text the value becomes ``<redacted>``.
* **conda tokens**: the ``/t/<token>/`` path segment of a channel URL (conda's
  ``CondaHttpAuth``) → ``/t/<redacted>/``.
* **netrc-style** ``password <secret>`` / ``account <secret>`` pairs (``man 5 netrc``),
  ``NAME=value`` with a secret ``NAME``, and HTTP ``Authorization: Bearer|Basic …`` values.
* **Credential options** (:func:`secret_option`: the option's name says its value is a
  credential — ``--token``, ``--api-key``, ``--access-key``, ``--secret``, ``--password``,
  ``--auth`` …): the value after ``=``, after blanks in text, and in a command line
  (:func:`redact_argv`; :func:`redact_tree` treats every list of strings as one) the next
  argument, whatever it looks like.
* **Well-known token shapes** anywhere: GitHub (``ghp_``, ``gho_``, ``ghs_``, ``github_pat_``),
  Hugging Face (``hf_``), GitLab (``glpat-``), Slack (``xox?-``), OpenAI-style ``sk-``, AWS access
  key ids (``AKIA…``).
* **Variable names**: ``*TOKEN*``, ``*SECRET*``, ``*PASSWORD*``/``*PASSWD*``, ``*KEY*``,
  ``*CREDENTIAL*``, ``*AUTH*``, ``*COOKIE*``, ``*SESSION*`` and ``*_PAT`` → the whole value is
  ``<redacted>``.
* **Free-text variables** (:data:`FREE_TEXT_VARIABLES`: ``SLURM_JOB_COMMENT``, what users
  type into ``sbatch --comment``) → only a digest, ``<redacted: sha256 …, N characters>``
  (:func:`free_text_digest`): no detector can know every secret a comment may hold.

:func:`printable` turns the undecodable bytes of a path or variable (Python's
``surrogateescape``, PEP 383) into ``\\xNN`` escapes so they can be written as UTF-8.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = [
    "FREE_TEXT_VARIABLES",
    "REDACTED",
    "free_text_digest",
    "printable",
    "redact_argv",
    "redact_text",
    "redact_text_urls",
    "redact_tree",
    "redact_url",
    "redact_variable",
    "scrub",
    "secret_fragments",
    "secret_name",
    "secret_option",
    "secret_param",
    "secret_value",
]

REDACTED = "<redacted>"

_SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW(OR)?D|KEY|CREDENTIAL|AUTH|COOKIE|SESSION|(?:^|_)PAT(?:$|_)", re.IGNORECASE
)
#: Query parameters that carry a credential (exact, case-insensitive) …
_SECRET_PARAMS = frozenset({
    "token", "sig", "signature", "access_token", "key", "api_key", "apikey", "auth",
    "password", "passwd", "pwd", "secret", "client_secret", "refresh_token", "id_token",
    "code", "private_token", "x-amz-security-token", "sv_token",
})
#: … and prefixes of presigned-URL parameter families (AWS SigV4, GCS V4).
_SECRET_PARAM_PREFIXES = ("x-amz-", "x-goog-")

_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*://"
# user-info: everything between "scheme://" and the last "@" before the first "/", "?" or "#"
# (any other character, quotes and spaces included) …
_USERINFO = re.compile(rf"(?P<scheme>{_SCHEME})(?P<ui>[^/?#\n]*)@")
# … or "user:" + a password that itself contains "/" (not a port: digits then "/" or end).
_USERINFO_SLASH = re.compile(
    rf"(?P<scheme>{_SCHEME})(?P<ui>[^\s:/@?#]+:(?!\d+(?:[/?#\s]|$))[^\s]*)@(?=[\w\[.-])"
)
_CONDA_TOKEN = re.compile(r"/t/[^/\s\"'<>]+(?=/|$)")
_URL_IN_TEXT = re.compile(rf"{_SCHEME}[^\s'\"<>]+")
_QUERY_IN_TEXT = re.compile(r"(?P<lead>[?&])(?P<name>[A-Za-z0-9_.\-]+)=(?P<value>[^&#\s\"'<>]*)")
_SCP_LIKE = re.compile(r"^(?P<user>[^@/:]+)@(?P<host>[^:/]+):(?P<path>.*)$")
_NETRC = re.compile(r"(?i)(?P<k>\b(?:password|passwd|account)\s+)(?P<v>[^\s]+)")
# An option that may name a credential (:data:`_OPTION_WORDS` in it; :func:`secret_option`
# decides) and its value, after "=" or (when the value does not look like an option itself)
# after blanks.
_OPTION = re.compile(
    r"(?i)(?P<k>(?:(?<=\s)|^)(?P<opt>--?[A-Za-z0-9_.-]*"
    r"(?:token|pass|pwd|secret|key|auth|cookie|credential)[A-Za-z0-9_.-]*)"
    r"(?:=|\s+(?!--?[A-Za-z])))(?P<v>[^\s]+)"
)
#: What every match of :data:`_OPTION` holds (lower case).
_OPTION_WORDS = ("token", "pass", "pwd", "secret", "key", "auth", "cookie", "credential")
_ASSIGN = re.compile(r"(?P<k>(?<![A-Za-z0-9_.-])(?P<name>[A-Z_][A-Z0-9_]*)=)(?P<v>[^\s]+)")
# HTTP credentials (RFC 7617 Basic, RFC 6750 Bearer) as a header value or after "Authorization".
_BEARER = re.compile(r"(?P<k>(?:(?i:authorization)\s*[:=]\s*)?\b(?:Bearer|Basic|bearer)\s+)"
                     r"(?P<v>[A-Za-z0-9._~+/=-]{8,})")
_TOKEN_SHAPES = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{20,}"
    r"|glpat-[A-Za-z0-9_-]{16,}|xox[abprs]-[A-Za-z0-9-]{10,}|sk-(?:proj-)?[A-Za-z0-9_-]{32,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16})\b"
)

#: What every match of :data:`_TOKEN_SHAPES` starts with.
_TOKEN_PREFIXES = ("gh", "github_pat_", "hf_", "glpat-", "xox", "sk-", "AKIA", "ASIA")

#: Cheap pre-check: a string none of the rules can touch skips them all.
_TRIGGER = re.compile(
    r"://|[?&=]|(?i:pass|account|bearer|basic|token|secret|key|auth|pwd|cookie|credential)|gh[pousr]_"
    r"|github_pat_|hf_"
    r"|glpat-|xox|sk-|AKIA|ASIA|:[^\s/@:]+@"
)
#: :data:`_TRIGGER`'s alternatives: literals, the case-insensitive words (found with ``in`` on
#: ``str.lower()`` of a text without :data:`_CASE_SPECIAL`), and the two patterns left.
_TRIGGER_LITERALS = ("://", "?", "&", "=", "github_pat_", "hf_", "glpat-", "xox", "sk-", "AKIA", "ASIA")
_TRIGGER_WORDS = ("pass", "account", "bearer", "basic", "token", "secret", "key", "auth", "pwd", "cookie",
                  "credential")
_TRIGGER_REST = re.compile(r"gh[pousr]_|:[^\s/@:]+@")


#: The characters outside ASCII that ``(?i)`` matches to an ASCII letter (İ ı ſ and the Kelvin
#: sign); U+0130 is also the only character whose lower case is two characters.  In a text
#: without them, ``(?i)`` matching of ASCII words is ``in`` on ``str.lower()`` of it, position
#: for position (``tests/test_cache.py`` checks this table against the running ``re``).
_CASE_SPECIAL = ("\u0130", "\u0131", "\u017f", "\u212a")


def _plain_case(text: str) -> bool:
    """Whether ``text`` holds none of :data:`_CASE_SPECIAL`."""
    return text.isascii() or not any(c in text for c in _CASE_SPECIAL)


def _triggered(text: str) -> bool:
    """``_TRIGGER.search(text) is not None``; for a long text found with ``in`` checks,
    which are much faster than a search for a pattern with this many alternatives."""
    if len(text) < 512 or not _plain_case(text):
        return _TRIGGER.search(text) is not None
    if any(w in text for w in _TRIGGER_LITERALS):
        return True
    low = text.lower()
    return any(w in low for w in _TRIGGER_WORDS) or _TRIGGER_REST.search(text) is not None


# The user-info of a URL that a colon-separated list (LD_LIBRARY_PATH, PATH) has split apart:
# "https://u:pw@h/lib" becomes the entries "https" and "//u:pw@h/lib" (or "/u:pw@h/lib" once a
# search path is normalised).  A path entry holding "name:secret@host" keeps the name only.
_SPLIT_USERINFO = re.compile(r"(?<=/)(?P<user>[^\s/:@]+):(?P<pw>[^\s/@]+)@(?=[\w\[.-])")


def secret_name(name: str) -> bool:
    """``True`` when a variable name looks like it holds a secret.

    :param name: e.g. ``"HF_TOKEN"``, ``"WANDB_API_KEY"``, ``"GITHUB_PAT"`` (all ``True``),
        ``"PATH"`` (``False``: ``PAT`` counts only as a whole ``_``-separated word).
    """
    return bool(_SECRET_NAME.search(name))


def secret_param(name: str) -> bool:
    """``True`` when a URL query parameter carries a credential (see the module rules)."""
    low = name.lower()
    return low in _SECRET_PARAMS or low.startswith(_SECRET_PARAM_PREFIXES) or secret_name(name)


def printable(text: str) -> str:
    """``text`` with undecodable bytes (lone surrogates from ``surrogateescape``) as ``\\xNN``.

    Paths and variables on Linux are bytes; Python decodes them with ``surrogateescape``
    (PEP 383), and such a string cannot be encoded as UTF-8.  This makes it writable.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return text


def _strip_userinfo(match: re.Match[str]) -> str:
    scheme = match.group("scheme")
    ui = match.group("ui")
    base = scheme[:-3].split("+")[-1].lower()
    if base in {"ssh", "git"} and ":" not in ui and not re.search(r"[\s\"']", ui):
        return match.group(0)  # ssh://git@host: a user name, no secret
    return scheme


def _userinfo_out(text: str) -> str:
    text = _USERINFO_SLASH.sub(_strip_userinfo, text)
    return _USERINFO.sub(_strip_userinfo, text)


def redact_url(url: str) -> str:
    """Return ``url`` without credentials (see the module docstring for the rules).

    >>> redact_url("https://user:tok@github.com/org/repo.git")
    'https://github.com/org/repo.git'
    >>> redact_url("https://conda.anaconda.org/t/abc-123/my-channel/linux-64")
    'https://conda.anaconda.org/t/<redacted>/my-channel/linux-64'
    >>> redact_url("git@github.com:org/repo.git")
    'git@github.com:org/repo.git'
    >>> redact_url("https://b.s3.amazonaws.com/f?X-Amz-Signature=abc&v=1")
    'https://b.s3.amazonaws.com/f?v=1'
    """
    if "://" not in url:
        if _SCP_LIKE.match(url):
            return url  # user@host:path (scp-like ssh): a user name, no secret
        return redact_text(url)
    url = _userinfo_out(url)
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_text(url)
    path = _CONDA_TOKEN.sub(f"/t/{REDACTED}", parts.path)
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        kept = [(k, v) for k, v in pairs if not secret_param(k)]
        if len(kept) != len(pairs):
            query = urlencode(kept, safe="/:")
    fragment = _QUERY_IN_TEXT.sub(_query_value, parts.fragment) if parts.fragment else ""
    out = urlunsplit((parts.scheme, parts.netloc, path, query, fragment))
    return _TOKEN_SHAPES.sub(REDACTED, out)


def _query_value(match: re.Match[str]) -> str:
    if secret_param(match.group("name")) and match.group("value") not in ("", REDACTED):
        return f"{match.group('lead')}{match.group('name')}={REDACTED}"
    return match.group(0)


def _keyed(match: re.Match[str]) -> str:
    if "opt" in match.re.groupindex and not secret_option(match.group("opt")):
        return match.group(0)
    return match.group("k") + (match.group("v") if match.group("v") == REDACTED else REDACTED)


def _assign(match: re.Match[str]) -> str:
    if secret_name(match.group("name")):
        return _keyed(match)
    return match.group(0)


def redact_text(text: str) -> str:
    """Apply every rule of this module to free text (a command line, a value, a message).

    Idempotent: ``redact_text(redact_text(s)) == redact_text(s)``.

    >>> redact_text('pip install --index-url https://u:p w"x@h/simple pkg')
    'pip install --index-url https://h/simple pkg'
    >>> redact_text("machine h login me password s3cr3t")
    'machine h login me password <redacted>'
    """
    if not text or not _triggered(text):
        return text
    # Each rule runs only when the text it is given holds what any match of it must contain
    # (checked with ``in``, much faster than a regex search over a long text); for the
    # case-insensitive rules that needs a text without :data:`_CASE_SPECIAL` (``(?i)`` also
    # matches "ſ" for "s" and the Kelvin sign for "k"), otherwise they always run.  The result
    # is the same as running all.
    if "://" in text:
        text = _userinfo_out(text)
    if "@" in text and ":" in text and "/" in text:
        text = _SPLIT_USERINFO.sub(lambda m: f"{m.group('user')}@", text)
    if "://" in text:
        text = _URL_IN_TEXT.sub(lambda m: _url_in_text(m.group(0)), text)
    if "=" in text and ("?" in text or "&" in text):
        text = _QUERY_IN_TEXT.sub(_query_value, text)
    low = text.lower() if _plain_case(text) else None
    if low is None or "passw" in low or "account" in low:
        text = _NETRC.sub(_keyed, text)
    if "-" in text and (low is None or any(w in low for w in _OPTION_WORDS)):
        text = _OPTION.sub(_keyed, text)
    if "=" in text:
        text = _ASSIGN.sub(_assign, text)
    if "Bearer" in text or "Basic" in text or "bearer" in text:
        text = _BEARER.sub(_keyed, text)
    if any(w in text for w in _TOKEN_PREFIXES):
        text = _TOKEN_SHAPES.sub(REDACTED, text)
    return text


def _url_in_text(url: str) -> str:
    # In text the query values are replaced (not dropped) so the rest of the text keeps its
    # shape; only the conda token and token shapes are handled here.
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if "/t/" in parts.path:
        path = _CONDA_TOKEN.sub(f"/t/{REDACTED}", parts.path)
        return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))
    return url


#: The last word of an option name that makes it a credential (``--token``, ``--hf-token``,
#: ``--db-password``, ``--client-secret``, ``--auth``, ``--cookie``, ``--credentials``) …
_CREDENTIAL_WORDS = frozenset({
    "token", "authtoken", "accesstoken", "apitoken", "password", "passwd", "pwd", "passphrase",
    "pass", "passin", "passout", "secret", "credential", "credentials", "cookie", "cookies", "auth",
    "oauth", "authorization", "apikey", "accesskey", "secretkey", "privatekey",
})
#: … ``key`` after one of these words (``--api-key``, ``--access-key``, ``--secret-access-key``,
#: ``--private-key``); a bare ``--key`` (sort keys, dictionary keys) does not say it …
_KEY_QUALIFIERS = frozenset({
    "api", "access", "secret", "private", "auth", "client", "account", "license", "licence",
    "signing", "encryption", "master", "sas", "storage", "subscription", "session", "service",
    "app", "application", "shared", "hmac", "deploy", "ssh",
})
#: … ``token`` after one of these is a tokenizer's vocabulary entry (``--pad-token``,
#: ``--eos-token``) or a count (``--max-token``), not a credential …
_VOCAB_QUALIFIERS = frozenset({
    "pad", "eos", "bos", "unk", "sep", "cls", "mask", "start", "end", "special", "max", "min", "num",
})
#: … and an option that starts with one of these is a switch (``--no-auth``,
#: ``--use-auth-token``, ``--with-token``), whose next argument is not its value.
_SWITCH_WORDS = frozenset({"no", "use", "with", "without", "enable", "disable", "skip", "require"})


def secret_option(option: str) -> bool:
    """``True`` when a command-line option's name says that its value is a credential.

    The rule: split the name (leading dashes and any ``=value`` off) at ``-``, ``_`` and ``.``;
    its *last* word says what the value is — ``token``, ``password``/``passwd``/``pwd``,
    ``passphrase``, ``pass`` (OpenSSL ``-pass``), ``secret``, ``credential(s)``, ``cookie(s)``,
    ``auth``/``oauth``/``authorization``, ``apikey``; or ``key`` after a word such as ``api``,
    ``access``, ``secret``, ``private``.  Not: ``token`` of a tokenizer (``--pad-token``,
    ``--max-token``), a name whose last word says it is something else (``--token-file``,
    ``--password-stdin``, ``--tokenizer``, ``--max-tokens``), a switch (``--no-auth``,
    ``--use-auth-token``), a bare ``--key``.  Case-insensitive.

    >>> [secret_option(o) for o in ("--token", "--api-key", "--aws-secret-access-key", "--auth")]
    [True, True, True, True]
    >>> [secret_option(o) for o in ("--tokenizer", "--pad-token", "--token-file", "--key", "-o")]
    [False, False, False, False, False]

    :param option: one argument as given, e.g. ``"--hf-token"`` or ``"--password=x"``.
    """
    if not option.startswith("-"):
        return False
    name = option.lstrip("-").split("=", 1)[0].lower()
    words = [w for w in re.split(r"[-_.]+", name) if w]
    if not words or words[0] in _SWITCH_WORDS:
        return False
    last, before = words[-1], (words[-2] if len(words) > 1 else "")
    if last == "key":
        return before in _KEY_QUALIFIERS
    if last == "token" and before in _VOCAB_QUALIFIERS:
        return False
    return last in _CREDENTIAL_WORDS


def redact_argv(argv: Iterable[str]) -> tuple[str, ...]:
    """A command line with its secrets out: each argument through :func:`redact_text`
    (``--password=X`` there), and the argument after an option that names a credential
    (:func:`secret_option`: ``--token X``, ``--api-key X``, ``--secret X``) replaced by
    ``<redacted>``, whatever it looks like.  Undecodable bytes become ``\\xNN``
    (:func:`printable`).  Idempotent.

    >>> redact_argv(["hf", "upload", "--token", "abc", "--private-key=k", "--repo", "r"])
    ('hf', 'upload', '--token', '<redacted>', '--private-key=<redacted>', '--repo', 'r')
    """
    out: list[str] = []
    after_secret = False
    for arg in argv:
        text = printable(str(arg))
        out.append(REDACTED if after_secret else redact_text(text))
        after_secret = "=" not in text and secret_option(text)
    return tuple(out)


def redact_text_urls(text: str) -> str:
    """Former name of :func:`redact_text` (kept for callers): redact every secret in ``text``."""
    return redact_text(text)


def secret_value(value: str) -> bool:
    """``True`` when a value itself carries a credential (:func:`redact_text` changes it)."""
    return redact_text(value) != value


#: Variables that hold free text a user typed (``sbatch --comment``: Slurm sets
#: ``SLURM_JOB_COMMENT``), where anything can be — a token in a form no rule knows included.
#: Their value is never recorded; :func:`free_text_digest` stands for it.
FREE_TEXT_VARIABLES = frozenset({"SLURM_JOB_COMMENT"})

_DIGEST = re.compile(r"<redacted: sha256 [0-9a-f]{64}, \d+ characters>")


def free_text_digest(value: str) -> str:
    """What is recorded for the value of a :data:`FREE_TEXT_VARIABLES` variable:
    ``<redacted: sha256 HEX, N characters>`` (SHA-256 of the UTF-8 of its :func:`printable`
    form) — two runs with the same comment compare equal, and no word of it is
    kept.  A value that already is such a digest is returned unchanged (idempotent).
    """
    import hashlib

    if _DIGEST.fullmatch(value):
        return value
    digest = hashlib.sha256(printable(value).encode("utf-8")).hexdigest()
    return f"<redacted: sha256 {digest}, {len(value)} characters>"


def redact_variable(name: str, value: str) -> tuple[str, bool]:
    """The value of variable ``name`` as it may be recorded, and whether it was changed.

    A free-text variable (:data:`FREE_TEXT_VARIABLES`) gives its :func:`free_text_digest`; a
    secret name (:func:`secret_name`) gives ``<redacted>``; otherwise the value passes
    :func:`redact_text`.  Undecodable bytes become ``\\xNN`` (:func:`printable`), which does not
    count as a redaction.
    """
    if name in FREE_TEXT_VARIABLES:
        return free_text_digest(value), True
    if secret_name(name):
        return REDACTED, True
    shown = printable(value)
    clean = redact_text(shown)
    return clean, clean != shown


def redact_tree(data: Any) -> Any:
    """A copy of a JSON-like tree (dicts, lists, strings …) with every string passed through
    :func:`printable` and :func:`redact_text`; a dict value whose key is a secret name
    (:func:`secret_name`, for tables of variables) becomes ``<redacted>``.

    Used on every document envlock writes (manifests, JSON output): the last line of defence.
    """
    if isinstance(data, str):
        return redact_text(printable(data))
    if isinstance(data, Mapping):
        return {k: _tree_item(k, v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        if all(isinstance(v, str) for v in data):
            return list(redact_argv(data))  # a command line, maybe: "--token X" loses X
        return [redact_tree(v) for v in data]
    return data


def _tree_item(key: Any, value: Any) -> Any:
    if isinstance(value, str) and isinstance(key, str) and key.isupper():
        if key in FREE_TEXT_VARIABLES:
            return free_text_digest(value)
        if secret_name(key):
            return REDACTED
    return redact_tree(value)


_MIN_FRAGMENT = 4  # characters; shorter pieces (a user "u") would scrub innocent text


def secret_fragments(text: str) -> frozenset[str]:
    """The secret pieces inside ``text`` that :func:`redact_text` removes: URL passwords (and
    user-info), credential query values, token-shaped words.

    For text that envlock takes apart before it prints the parts — ``LD_LIBRARY_PATH`` split at
    ``:`` cuts ``https://u:pw@h/lib`` into ``//u`` and ``pw@h/lib``, where no URL rule can see
    the password any more; :func:`scrub` removes the fragments from such derived text.
    """
    out: set[str] = set()
    for rx in (_USERINFO_SLASH, _USERINFO):
        for m in rx.finditer(text):
            ui = m.group("ui")
            out.update(p for p in (ui, *ui.split(":", 1)[1:]) if p)
    for m in _QUERY_IN_TEXT.finditer(text):
        if secret_param(m.group("name")) and m.group("value"):
            out.add(m.group("value"))
    out.update(m.group(0) for m in _TOKEN_SHAPES.finditer(text))
    return frozenset(f for f in out if len(f) >= _MIN_FRAGMENT and f != REDACTED)


def scrub(text: str, fragments: frozenset[str]) -> str:
    """``text`` with every fragment of :func:`secret_fragments` replaced by ``<redacted>``
    (longest first), then :func:`redact_text`."""
    for f in sorted(fragments, key=len, reverse=True):
        text = text.replace(f, REDACTED)
    return redact_text(text)

