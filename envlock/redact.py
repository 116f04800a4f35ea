"""Keeping secrets out of manifests.

Rules (one place, used by every probe that records a URL or a variable):

* URLs: user-info is removed from ``http(s)``/``ftp`` URLs entirely (a GitHub token is often
  the *user* part), and from other schemes all but a bare user name (``ssh://git@host`` keeps
  ``git@``); conda's ``/t/<token>/`` path segment becomes ``/t/<redacted>/``; query parameters
  whose name looks secret are dropped.
* Variables: a name containing TOKEN, SECRET, PASSWORD, PASSWD, KEY, CREDENTIAL or AUTH, or a
  value holding a URL with user-info or a conda token, is replaced by ``<redacted>``.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = ["REDACTED", "redact_url", "redact_text_urls", "secret_name", "secret_value"]

REDACTED = "<redacted>"

_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW(OR)?D|KEY|CREDENTIAL|AUTH|COOKIE|SESSION", re.I)
_CONDA_TOKEN = re.compile(r"/t/[^/]+/")
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")
_SCP_LIKE = re.compile(r"^(?P<user>[^@/:]+)@(?P<host>[^:/]+):(?P<path>.*)$")


def secret_name(name: str) -> bool:
    """``True`` when a variable or parameter name looks like it holds a secret."""
    return bool(_SECRET_NAME.search(name))


def redact_url(url: str) -> str:
    """Return ``url`` without credentials (see the module docstring for the rules).

    >>> redact_url("https://user:tok@github.com/org/repo.git")
    'https://github.com/org/repo.git'
    >>> redact_url("https://conda.anaconda.org/t/abc-123/my-channel/linux-64")
    'https://conda.anaconda.org/t/<redacted>/my-channel/linux-64'
    >>> redact_url("git@github.com:org/repo.git")
    'git@github.com:org/repo.git'
    """
    scp = _SCP_LIKE.match(url)
    if scp and "://" not in url:
        return url  # user@host:path (scp-like ssh): a user name, no secret
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        base_scheme = parts.scheme.split("+")[-1].lower()
        if base_scheme in {"ssh", "git"} and ":" not in userinfo:
            netloc = f"{userinfo}@{hostport}"
        else:
            netloc = hostport
    path = _CONDA_TOKEN.sub(f"/t/{REDACTED}/", parts.path)
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, v) for k, v in pairs if not secret_name(k)], safe="/:")
    return urlunsplit((parts.scheme, netloc, path, query, parts.fragment))


def redact_text_urls(text: str) -> str:
    """Apply :func:`redact_url` to every URL inside free text (a command line, a value)."""
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)


def secret_value(value: str) -> bool:
    """``True`` when a value itself carries a credential (URL user-info, conda token)."""
    for match in _URL_IN_TEXT.finditer(value):
        if redact_url(match.group(0)) != match.group(0):
            return True
    return False
