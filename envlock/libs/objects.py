"""The link map's records: what was asked, what was tried, what was loaded.

glibc keeps one ``struct link_map`` per loaded object (``include/link.h``: ``l_name``,
``l_libname``, ``l_loader``, ``l_searchlist``, ``l_scope``) and reports each failed request
through ``_dl_signal_error``; :class:`LoadedObject` and :class:`Resolution` are those, as
the model (:mod:`envlock.libs.linkmap`) records them, with :class:`Attempt` for each file
``open_path`` tried (``LD_DEBUG=libs``'s ``trying file=`` lines).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

from envlock.libs.elf import ElfInfo

__all__ = [
    "RULES",
    "Attempt",
    "LoadedObject",
    "ObjectKind",
    "RequestKind",
    "Resolution",
    "Rule",
    "VersionProblem",
    "breadth_first",
    "describe_object",
]

#: What found an object, or the list a tried file came from: a step of the loader's search
#: (:data:`RULES`), or ``"preload"`` for an ``LD_PRELOAD`` entry.
Rule = Literal["already-loaded", "slash", "rpath", "ld_library_path", "runpath", "ld.so.cache",
               "default", "preload"]

#: How a request was made: a ``DT_NEEDED`` entry, an ``LD_PRELOAD`` entry, a ``dlopen`` call.
RequestKind = Literal["needed", "preload", "dlopen"]

#: How an object came into the link map (:attr:`LoadedObject.kind`).
ObjectKind = Literal["executable", "interpreter", "preload", "needed", "dlopen"]

#: The rules that can find an object, in the order the loader applies them.
RULES: tuple[Rule, ...] = (
    "already-loaded",
    "slash",
    "rpath",
    "ld_library_path",
    "runpath",
    "ld.so.cache",
    "default",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Attempt:
    """One file the loader tried.

    :ivar path: the path string as the loader builds it (not canonicalised).
    :ivar rule: the step it belongs to (see :data:`RULES`).
    :ivar source: which list it came from, e.g. ``"RPATH of /x/libtorch.so"``.
    :ivar outcome: ``"found"``, ``"absent"``, ``"wrong ELF class: ELFCLASS32"``,
        ``"wrong machine EM_AARCH64"`` or a fatal ``open_verify`` message.
    """

    path: str
    rule: Rule
    source: str
    outcome: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Resolution:
    """The answer to one request (a DT_NEEDED entry, a preload or a dlopen argument).

    :ivar name: the string requested.
    :ivar requester: path of the requesting object (``""`` for LD_PRELOAD).
    :ivar kind: ``"needed"``, ``"preload"`` or ``"dlopen"``.
    :ivar path: the path the object is known by (its ``l_name``), or ``None`` if not found.
    :ivar rule: what found it (see :data:`RULES`, plus ``"preload"``); ``None`` if not found.
    :ivar source: the list that held it (``"RPATH of …"``, ``"LD_LIBRARY_PATH"``, …).
    :ivar tried: every file tried, in order.
    :ivar error: the loader's error, e.g. ``"cannot open shared object file: No such file or
        directory"``.
    :ivar object_id: index of the object in :attr:`Process.objects`, or ``None``.
    :ivar filtee: ``"filter"`` (``DT_FILTER``: the load fails without it) or ``"auxiliary"``
        (``DT_AUXILIARY``: ignored when it cannot be loaded) when the name is a filter's
        filtee (glibc ``elf/dl-deps.c``), else ``None`` (``kind`` is then ``"needed"`` too).
    """

    name: str
    requester: str
    kind: RequestKind
    path: str | None = None
    rule: Rule | None = None
    source: str = ""
    tried: tuple[Attempt, ...] = ()
    error: str | None = None
    object_id: int | None = None
    filtee: Literal["filter", "auxiliary"] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class VersionProblem:
    """A required symbol version the provider does not define (fatal in glibc).

    :ivar consumer: path of the object needing it.
    :ivar provider: path of the object that will be bound.
    :ivar file: the DT_NEEDED name of the provider (``vn_file``).
    :ivar version: the missing version, e.g. ``"GLIBCXX_3.4.30"``.
    :ivar message: glibc's text: ``<provider>: version `V' not found (required by <consumer>)``.
    """

    consumer: str
    provider: str
    file: str
    version: str
    message: str


@dataclass(kw_only=True, slots=True)
class LoadedObject:
    """One object in the modelled link map (mutable while the model runs).

    :ivar id: position in load order.
    :ivar path: ``l_name``: the path string the loader opened.
    :ivar info: the ELF facts.
    :ivar names: every name it was requested under (``l_libname``).
    :ivar loader: id of ``l_loader`` (the object whose DT_NEEDED loaded it); ``None`` for the
        executable and dlopen'ed objects.
    :ivar kind: ``"executable"``, ``"interpreter"``, ``"preload"``, ``"needed"``, ``"dlopen"``.
    :ivar origin: the ``$ORIGIN`` value for its strings.
    :ivar file_id: ``(st_dev, st_ino)``.
    :ivar deps: ids of the objects its DT_NEEDED entries resolved to, in order.
    :ivar resolution: the :class:`Resolution` that loaded it (``None`` for the executable).
    :ivar group: id of the object whose ``execve``/``dlopen`` first loaded it (the root of
        its local scope, ``l_searchlist``, used when its relocations are processed).
    :ivar filtees: ids of its filtees (``DT_FILTER``/``DT_AUXILIARY`` objects loaded), in
        order; they come before it in every search list.
    :ivar in_global: part of the global scope (the program's closure, LD_PRELOAD, and the
        closures of ``RTLD_GLOBAL`` dlopens; glibc ``elf/dl-open.c`` ``add_to_global``).
    """

    id: int
    path: str
    info: ElfInfo
    names: list[str] = field(default_factory=list)
    loader: int | None = None
    kind: ObjectKind = "needed"
    origin: str | None = None
    file_id: tuple[int, int] = (0, 0)
    deps: list[int] = field(default_factory=list)
    resolution: Resolution | None = None
    group: int | None = None
    in_global: bool = False
    filtees: list[int] = field(default_factory=list)

    @property
    def soname(self) -> str | None:
        """``DT_SONAME``."""
        return self.info.soname



class _HasDeps(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def deps(self) -> Sequence[int]: ...


_Node = TypeVar("_Node", bound=_HasDeps)


def breadth_first(root: _Node, objects: Sequence[_Node]) -> list[_Node]:
    """``root`` and every object reachable through ``deps`` (indices into ``objects``),
    breadth-first, each once — the order of glibc's ``l_searchlist`` (``elf/dl-deps.c``).
    Iterative and linear in the number of edges."""
    out = [root]
    seen = {root.id}
    i = 0
    while i < len(out):
        for d in out[i].deps:
            if d not in seen:
                seen.add(d)
                out.append(objects[d])
        i += 1
    return out



def describe_object(obj: LoadedObject) -> str:
    """How ``obj`` came into the link map, e.g. ``"dlopen'ed as /x/libfoo.so"``."""
    how = {"executable": "the executable", "interpreter": "the dynamic loader",
           "preload": "preloaded", "dlopen": "dlopen'ed", "needed": "loaded"}[obj.kind]
    return f"{how} as {obj.path}"
