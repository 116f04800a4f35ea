"""``envlock find [WHERE]... [QUERY]``: which results were computed in an environment like that?"""

from __future__ import annotations

import os
import sys

import click

from envlock.commands._common import handle_errors, will_exit

__all__ = ["find"]


_OPERATOR_CHARS = " <>=!~()\"'"

#: the query's own words: a fact name followed by one of them continues its condition.
_WORDS = ("not", "and", "or", "set", "unset")


def _split_args(args: tuple[str, ...]) -> tuple[list[str], str]:
    """Leading arguments that exist as files or directories are WHERE; the rest is the query.

    A first non-WHERE argument that is a path (it holds ``/``), or one word followed by
    arguments that are a whole query of their own (``find runz 'torch < 2'``: a mistyped WHERE,
    not the fact ``runz``), is refused as a WHERE that does not exist, before anything is read.

    :raises ManifestError: that WHERE (one line).
    """
    from envlock.find.query import SHORT, join_query

    where: list[str] = []
    rest = list(args)
    while rest and os.path.exists(rest[0]):
        where.append(rest.pop(0))
    if rest and not any(c in rest[0] for c in _OPERATOR_CHARS):
        from envlock.errors import ManifestError

        if os.sep in rest[0]:
            raise ManifestError(f"{rest[0]}: no such file or directory")
        if (len(rest) > 1 and rest[0] not in SHORT and rest[0].lower() not in _WORDS
                and rest[1].lower() not in _WORDS and _whole_query(join_query(rest[1:]))):
            raise ManifestError(f"{rest[0]}: no such file or directory (a query that starts with "
                                f"this fact is one argument: {join_query(rest)!r})")
    return where or ["."], join_query(rest)


def _whole_query(arg: str) -> bool:
    """Whether one argument is a query of several words that parses on its own."""
    from envlock.find.query import QueryError, parse

    if not any(c in arg for c in _OPERATOR_CHARS):
        return False
    try:
        parse(arg)
    except QueryError:
        return False
    return True


@click.command("find")
@click.argument("args", nargs=-1, metavar="[WHERE]... [QUERY]")
@click.option("--index", "index_path", metavar="FILE", default=None,
              help="The index file, in a directory that exists (default: "
                   "~/.cache/envlock/find/index.sqlite, created if missing; put it next to the "
                   "results to share it).")
@click.option("--no-update", is_flag=True, help="Query the index as it is; do not rescan WHERE.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="Output format.")
@click.option("--group-by", "group_by", type=click.Choice(["environment"]), default=None,
              help="Cluster the matching results by environment fingerprint and say how each "
                   "cluster differs from the largest.")
@click.option("--advisories", is_flag=True,
              help="Run every built-in advisory (known environment bugs that changed numbers).")
@click.option("--export", "export", metavar="FILE.parquet", default=None,
              help="Also write the matching results' facts to Parquet, one row per result × fact "
                   "(needs pyarrow: pip install 'envlock[find]').")
@click.option("--force", is_flag=True, help="Replace an existing --export file.")
@click.option("--limit", type=click.IntRange(min=0), default=50, show_default=True,
              help="Rows of the text table (0: all).")
@click.option("--jobs", type=click.IntRange(min=1), default=None,
              help="Processes reading changed files (default: the usable CPUs, at most 8).")
@handle_errors
def find(args: tuple[str, ...], index_path: str | None, no_update: bool, fmt: str,
         group_by: str | None, advisories: bool, export: str | None, force: bool, limit: int,
         jobs: int | None) -> None:
    """Find the results (manifests, run records) whose facts match QUERY.

    \b
    envlock find results/ 'torch < 1.12 and gpu.arch >= sm_80'
    envlock find runs/ 'torch.tf32.matmul == true'
    envlock find runs/ 'CUBLAS_WORKSPACE_CONFIG unset' --format json
    envlock find runs/ --group-by environment
    envlock find results/ --advisories

    WHERE (default: .) is searched at any depth for manifest.toml, run.toml and every other
    envlock manifest (.toml or .json); files that cannot be read are named on stderr, one
    line each, and skipped.  The query syntax and the facts are in docs/find.md.

    Exit status (as grep): 0 a result matched, 1 none did, 2 trouble (a bad query, an
    unknown fact name: one line with the nearest names).
    """
    from envlock.find import index as ix_mod
    from envlock.find.matches import search
    from envlock.render import findreport as render

    where, query = _split_args(args)
    if advisories and query:
        raise click.UsageError("--advisories runs the built-in queries; give no QUERY")
    if query.strip():  # a bad query fails before any file under WHERE is read
        from envlock.find.operands import check_static
        from envlock.find.query import parse

        check_static(parse(query))
    path = ix_mod.check_db_path(index_path) if index_path else ix_mod.default_path()
    with ix_mod.Index(path, make_dir=index_path is None) as ix:
        if not no_update:
            report = ix.update(where, jobs=jobs)
            errors = report.errors
        else:
            errors = []
        for line in render.skipped_lines(errors):
            click.echo(line, err=True)
        if advisories:
            from envlock.find.advisories import load_advisories

            results = [(a, search(ix, where, a.query, strict=False)) for a in load_advisories()]
            code = will_exit(0 if any(ans.matches for _, ans in results) else 1)
            click.echo(render.advisories_json(results) if fmt == "json" else
                       render.advisories_text(results), nl=False)
            sys.exit(code)
        # the text table shows --limit rows: only those are built; JSON and --group-by take all
        text_only = fmt == "text" and group_by is None and limit
        answer = search(ix, where, query or None, limit=limit if text_only else None)
        answer.errors = errors
        if export:
            from envlock.find.export import export_parquet

            rows = export_parquet(ix, answer.ids, export, force=force)
            click.echo(f"wrote {export} ({rows} rows, {len(answer.ids)} results)", err=True)
        code = will_exit(0 if answer.count else 1)
        if group_by == "environment":
            from envlock.find.group import group_by_environment

            clusters = group_by_environment(ix, answer.ids)
            click.echo(render.clusters_json(clusters) if fmt == "json" else
                       render.clusters_text(clusters), nl=False)
        elif fmt == "json":
            click.echo(render.matches_json(answer), nl=False)
        else:
            click.echo(render.matches_text(answer, limit=limit or None), nl=False)
    sys.stdout.flush()
    sys.exit(code)
