"""The plans of the API's listing and pull statements stay flat as the data grows: with a 10,000-tag
repository beside 1,000 single-image ones (analysed, as autovacuum keeps a live PostgreSQL), a
tags page, a catalog page, a manifest lookup by tag or by digest and a referrers page read an
index in the order they return, in the big repository as in a tiny one, and never sort or scan a
whole repository.

The size is the smallest that still fails on the plans issue 25 found: a sort in another collation
than the index's shows at any size, and the single-column repository index is chosen as soon as the
average repository is tiny beside a big one (here 11 rows, as at issue 25's size). `QUERY_PLAN_TAGS=100000`
runs issue 25's 100,000-tag repository beside 10,000 single-image ones.

The statements are the registry's own: each query function is called, the SQL it ran is captured,
and the database explains that SQL (PostgreSQL: EXPLAIN ANALYZE; SQLite: EXPLAIN QUERY PLAN).
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Iterator

import pytest
from django.db import connection
from django.utils import timezone
from django.test.utils import CaptureQueriesContext

from ops.ui import queries as ui_queries
from ops.ui import seek
from registry import queries
from registry.queries import byte_order
from registry.queries import tallies as tally_queries
from registry.services import reachability
from registry.models import Blob, BlobLink, Manifest, ManifestReference, Repository, Tag
from tests.support import scale
from tests.support import scale_content as content
from tests.support.schema import indexes_on
from tests.support.ui_fixtures import plain_static  # noqa: F401

pytestmark = pytest.mark.django_db
TAGS = int(os.environ.get("QUERY_PLAN_TAGS", "10000"))
REFERRERS = 50
SHAPE = content.Shape(big_tags=TAGS, small=TAGS // 10, untagged_every=10, referrers=REFERRERS, files=False)
SMALL = content.small_repository(TAGS * 4 // 100)
POSTGRES = connection.vendor == "postgresql"
# Rows a page of 100 may touch: the page, the row that says another follows, index lookups.
WORK_BOUND = 1_000
# SQLite does not say what a plan read: its virtual machine's instructions for a statement, which
# grow with the rows read (about five a row of an index), are bounded instead. A bounded page here
# takes under 5,000, a read of the big repository over 50,000.
SQLITE_BOUND = 10_000


@pytest.fixture(scope="module")
def big(django_db_setup, django_db_blocker) -> Iterator[None]:
    with django_db_blocker.unblock():
        scale.load(SHAPE)
        yield
        with connection.cursor() as cursor:
            for model in (Tag, ManifestReference, Manifest, BlobLink, Blob, Repository):
                cursor.execute(f"DELETE FROM {model._meta.db_table}")


def _statements(call: Callable[[], Any]) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        call()
    return [query["sql"] for query in captured.captured_queries
            if query["sql"].lstrip().upper().startswith(("SELECT", "WITH"))]


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _check_postgres(sql: str, index: str | tuple[str, ...], sorts: bool = False, bound: int = WORK_BOUND) -> None:
    """The plan uses ``index`` (or one of them; none: any), scans no table, sorts nothing (unless
    ``sorts``) and touches fewer than ``bound`` rows."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}")
        document = cursor.fetchone()[0]
    explained = (json.loads(document) if isinstance(document, str) else document)[0]
    plan = explained["Plan"]
    nodes = list(_nodes(plan))
    shown = json.dumps(plan, indent=1)
    # Compiling a statement took longer than running it (the UI's untagged list: 7-10 ms of 12).
    assert "JIT" not in explained, f"compiled (JIT) for {explained['JIT']['Timing']['Total']} ms:\n{shown}"
    assert sorts or not [n for n in nodes if n["Node Type"] == "Sort"], f"sorts:\n{shown}"
    assert not [n for n in nodes if n["Node Type"] == "Seq Scan"], f"scans a table:\n{shown}"
    indexes = (index,) if isinstance(index, str) else index
    assert not indexes or set(indexes) & {n.get("Index Name") for n in nodes}, f"uses none of {indexes}:\n{shown}"
    touched = sum(n.get("Actual Rows", 0) * n.get("Actual Loops", 1) + n.get("Rows Removed by Filter", 0)
                  + n.get("Rows Removed by Index Recheck", 0) for n in nodes)
    assert touched < bound, f"reads {touched} rows:\n{shown}"


def _check_sqlite(sql: str, search: str | tuple[str, ...], sorts: bool = False, bound: int = SQLITE_BOUND) -> None:
    """A step of the plan reads ``search`` (or one of them), none scans a table or (unless
    ``sorts``) sorts, and running it takes fewer than ``bound`` instructions."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}")
        steps = [row[-1] for row in cursor.fetchall()]
    shown = "\n".join(steps)
    assert sorts or not [s for s in steps if "TEMP B-TREE" in s], f"sorts:\n{shown}"
    # A SCAN of an index in the order returned stops at the LIMIT; a SCAN of a table does not. A
    # subquery the statement materialized is its own result, as big as what built it.
    own = {f"SCAN {s.split()[1]}" for s in steps if s.startswith("MATERIALIZE")}
    scans = [s for s in steps if s.startswith("SCAN") and "INDEX" not in s and s != "SCAN CONSTANT ROW"
             and s not in own]
    assert not scans, f"scans a table:\n{shown}"
    searches = (search,) if isinstance(search, str) else search
    assert [s for s in steps if any(wanted in s for wanted in searches)], f"no step {searches}:\n{shown}"
    instructions = _sqlite_instructions(sql)
    assert instructions < bound, f"{instructions} instructions:\n{sql}\n{shown}"


def _sqlite_instructions(sql: str) -> int:
    counted = [0]

    def count() -> int:
        counted[0] += 100
        return 0  # go on

    raw = connection.connection
    raw.set_progress_handler(count, 100)
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            cursor.fetchall()
    finally:
        raw.set_progress_handler(None, 0)
    return counted[0]


def _check(call: Callable[[], Any], postgres_index: str | tuple[str, ...], sqlite_search: str | tuple[str, ...],
           postgres_sorts: bool = False) -> None:
    """On PostgreSQL the plan uses ``postgres_index`` (or one of them); on SQLite one of its steps
    reads ``sqlite_search`` (or one of them; SQLite names a unique constraint's index
    sqlite_autoindex_<table>_<n>)."""
    statements = _statements(call)
    assert statements
    for sql in statements:
        if POSTGRES:
            _check_postgres(sql, postgres_index, postgres_sorts)
        else:
            _check_sqlite(sql, sqlite_search)


@pytest.mark.parametrize("repository", [content.BIG, SMALL])
@pytest.mark.parametrize("after", [None, content.big_tag(TAGS // 2)])
def test_a_tags_page_reads_the_index_in_order(big, repository: str, after: str | None) -> None:
    _check(lambda: queries.tag_names(repository, after, 101), "tag_name_bytes",
           "INDEX sqlite_autoindex_registry_tag_1 (repository_id=?")


@pytest.mark.parametrize("after", [None, content.BIG, content.small_repository(TAGS // 20)])
def test_a_catalog_page_reads_the_index_in_order(big, after: str | None) -> None:
    _check(lambda: queries.catalog_names(after, 101), "repository_name_bytes",
           "INDEX sqlite_autoindex_registry_repository_1")


@pytest.mark.parametrize("repository", [content.BIG, SMALL])
@pytest.mark.parametrize("with_body", [True, False])
def test_a_manifest_by_tag_is_one_index_lookup(big, repository: str, with_body: bool) -> None:
    tag = content.big_tag(TAGS * 7 // 9) if repository == content.BIG else "latest"
    _check(lambda: queries.manifest_by_tag(repository, tag, with_body), "uniq_tag", "(repository_id=? AND name=?)")


@pytest.mark.parametrize("repository", [content.BIG, SMALL])
def test_a_manifest_by_digest_is_one_index_lookup(big, repository: str) -> None:
    number = TAGS * 7 // 9 if repository == content.BIG else TAGS * 4 // 100
    tag = content.big_tag(number) if repository == content.BIG else "latest"
    digest = content.image(repository, tag, number).digest
    assert queries.manifest_by_digest(repository, digest) is not None
    _check(lambda: queries.manifest_by_digest(repository, digest), "uniq_manifest_digest",
           "(repository_id=? AND digest=?)")


@pytest.mark.parametrize("artifact_type", [None, content.SIGNATURE])
@pytest.mark.parametrize("after", [None, REFERRERS // 2])
def test_a_referrers_page_reads_the_subjects_index_in_order(big, artifact_type: str | None, after: int | None) -> None:
    # Ordered by creation, the repository's manifest_pushed_idx also avoids the sort: SQLite took
    # it and read the whole big repository for 50 signatures (issue 25: 212 ms at 100,000 tags).
    subject = content.image(content.BIG, content.big_tag(0), 0).digest
    mark = content.digest_of(content.referrer(after)) if after is not None else None
    rows = queries.referrer_rows(subject, content.BIG, artifact_type, mark, 21)
    assert len(rows) == 21
    # The page after a referrer looks that one up by its digest first (one unique-index lookup).
    # PostgreSQL, expecting a subject of a referrer or two, may sort what the index found for it.
    _check(lambda: queries.referrer_rows(subject, content.BIG, artifact_type, mark, 21),
           ("manifest_referrers_idx", "uniq_manifest_digest"),
           ("INDEX manifest_referrers_idx (repository_id=? AND subject_digest=?", "(repository_id=? AND digest=?)"),
           postgres_sorts=True)


def test_the_indexes_listing_some_manifests_are_found_from_those_manifests(big) -> None:
    # The web UI's untagged list and garbage collection ask it for a page of digests; SQLite,
    # thinking a repository holds a few manifests, read every manifest of the big one instead.
    repository = Repository.objects.get(name=content.BIG).id
    digests = [content.image(content.BIG, content.big_tag(n), n).digest for n in range(0, TAGS, TAGS // 100)]
    _check(lambda: queries.index_parents(repository, digests), "reference_digest_idx",
           "INDEX reference_digest_idx (digest=?")


@pytest.fixture
def as_at_a_million(big) -> Iterator[None]:
    """SQLite's statistics as ANALYZE wrote them for issue 25's million images (a million
    single-image repositories beside the big one): a repository holds 2 manifests, a digest is
    referenced by 3, on average. Here the big repository is most of the data (11 a repository)."""
    if POSTGRES:
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT tbl, idx, stat FROM sqlite_stat1")
        saved = cursor.fetchall()
        for table, index, stat in saved:
            rows, *averages = stat.split()
            columns = [c[2] for c in cursor.execute(f'PRAGMA index_info("{index}")').fetchall()] if index else []
            if table == Manifest._meta.db_table and columns[:1] == ["repository_id"]:
                averages[0] = "2"
            elif table == ManifestReference._meta.db_table and columns[:1] == ["digest"]:
                averages[0] = "3"
            else:
                continue
            cursor.execute("UPDATE sqlite_stat1 SET stat = %s WHERE tbl = %s AND idx = %s",
                           [" ".join([rows, *averages]), table, index])
        cursor.execute("ANALYZE sqlite_schema")  # the planner reads the statistics again
    yield
    with connection.cursor() as cursor:
        for table, index, stat in saved:
            cursor.execute("UPDATE sqlite_stat1 SET stat = %s WHERE tbl = %s AND idx IS %s", [stat, table, index])
        cursor.execute("ANALYZE sqlite_schema")


def test_the_indexes_listing_a_manifest_on_its_page_are_found_from_it(as_at_a_million) -> None:
    # The web UI's manifest page: with a million tiny repositories beside the big one, SQLite took
    # the repository's manifests for a few and read all 110,000 of the big one's (485 ms a page).
    info = ui_queries.manifest(content.BIG, content.big_tag(42))
    _check(lambda: ui_queries.parents(info), "reference_digest_idx", "INDEX reference_digest_idx (digest=?")


@pytest.mark.parametrize("discount", [False, True])
def test_the_collectors_check_of_a_range_of_blobs_reads_no_reference_row(big, discount: bool) -> None:
    # Garbage collection walks the blobs in digest order and probes the references' index for
    # each: with kind (and, in a dry run, the manifest) only in the rows, each probe read a row of
    # the references at random, a page each once the table outgrew the cache (issue 25: 2.2 times
    # the time a range from 10,000 images to 100,000).
    ranges = list(queries.blob_ranges(500))
    low, high = ranges[len(ranges) // 2]
    if discount:
        queries.hold_doomed([Manifest.objects.filter(repository__name=content.BIG).order_by("id").first().id])
    try:
        with queries.range_plans():  # as the collector runs it
            statements = _statements(lambda: queries.unused_blobs(low, high, timezone.now(), discount=discount))
            assert len(statements) == 1
            if POSTGRES:  # the sort is of the few blobs found unreferenced
                _check_postgres(statements[0], "reference_digest_idx", sorts=True, bound=10 * 500)
                return
            with connection.cursor() as cursor:
                cursor.execute(f"EXPLAIN QUERY PLAN {statements[0]}")
                steps = [row[-1] for row in cursor.fetchall()]
    finally:
        queries.forget_doomed()
    assert [s for s in steps if "USING COVERING INDEX reference_digest_idx (digest=? AND kind=?)" in s], steps


@pytest.mark.parametrize("repository", [content.BIG, SMALL])
@pytest.mark.parametrize("shared", [True, False])
def test_a_blob_in_a_repository_is_found_from_the_blob(big, repository: str, shared: bool) -> None:
    # PostgreSQL, planning the join for a repository of a few links, read every link of the big
    # one to find a blob (issue 25's 100,000 tags: 540 ms for a blob HEAD or GET).
    number = TAGS * 7 // 9 if repository == content.BIG else TAGS * 4 // 100
    tag = content.big_tag(number) if repository == content.BIG else "latest"
    digest = content.BASE_DIGEST if shared else content.image(repository, tag, number).config_digest
    assert queries.linked_blob(repository, digest) is not None
    # The blob by its digest, then its link: by both columns, or (PostgreSQL, for a blob of few
    # links) by the blob's, which the bound on the rows read keeps honest.
    _check(lambda: queries.linked_blob(repository, digest),
           ("uniq_blob_link", *indexes_on(BlobLink, "blob"), *indexes_on(Blob, "digest")),
           ("(repository_id=? AND blob_id=?)", "sqlite_autoindex_registry_blob_1 (digest=?)"))


# -- the web UI's pages of the big repository -----------------------------------------------------

UI_WINDOW = 200  # the untagged list's window (ops.ui.queries.UNTAGGED_SCAN), small beside the repository


HALFWAY = "halfway"  # in a path: the cursor of the tag page halfway through the big repository


def _halfway(sort: str) -> str:
    """The cursor a page of the big repository's tags halfway through is reached by (its previous
    page's last row), as the list's links write it."""
    tags = Tag.objects.filter(repository__name=content.BIG)
    if sort == "name":
        name = tags.alias(key=byte_order("name")).order_by("key").values_list("name", flat=True)[TAGS // 2]
        return name
    moment, pk = tags.order_by("-updated_at", "-id").values_list("updated_at", "id")[TAGS // 2]
    return f"{seek.moment_text(moment)}.{pk}"


@pytest.mark.parametrize("path", [f"/ui/r/{content.BIG}/", f"/ui/r/{content.BIG}/?sort=name",
                                  f"/ui/r/{content.BIG}/?after={HALFWAY}",
                                  f"/ui/r/{content.BIG}/?sort=name&before={HALFWAY}",
                                  f"/ui/r/{content.BIG}/-/manifests/{content.big_tag(TAGS * 7 // 9)}"])
def test_a_page_of_the_big_repository_reads_a_bounded_part_of_it(big, client, plain_static, monkeypatch,
                                                                  path: str) -> None:
    # Issue 25: the tag page and a manifest page took 0.2 to 0.5 s at 100,000 tags: the untagged
    # list joined every manifest of the registry (PostgreSQL), its index parents and the referrers
    # read every manifest of the repository (SQLite), the config blob every link of it (PostgreSQL).
    # A later tag page skipped the tags before it (OFFSET): it now starts at its cursor.
    monkeypatch.setattr(ui_queries, "UNTAGGED_SCAN", UI_WINDOW)
    path = path.replace(HALFWAY, _halfway("name" if "sort=name" in path else "recent"))
    client.get(path)  # the first view of a big repository counts it, once (ops.ui.tallies)
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200
    if "after=" in path or "before=" in path:
        assert 'rel="prev"' in response.content.decode() and 'rel="next"' in response.content.decode()
    for sql in [q["sql"] for q in captured.captured_queries if q["sql"].lstrip().upper().startswith("SELECT")]:
        # The probe whether a repository is too big to count reads up to that many links, by design,
        # once (repeated in each figure's CASE, it read them four times).
        probes = min(1, sql.count(f"OFFSET {tally_queries.BIG_REPOSITORY}")) * tally_queries.BIG_REPOSITORY
        if POSTGRES:
            _check_postgres(sql, (), sorts=True, bound=WORK_BOUND + probes)
        else:
            _check_sqlite(sql, "", sorts=True, bound=SQLITE_BOUND + probes * 20)


@pytest.mark.parametrize("sort", ["recent", "name"])
@pytest.mark.parametrize("backwards", [False, True])
def test_a_later_tag_page_reads_the_index_from_its_cursor(big, sort: str, backwards: bool) -> None:
    info = ui_queries.repository(content.BIG)
    cursor = _halfway(sort)
    page = ui_queries.tags(info, *(("", cursor) if backwards else (cursor, "")), sort)[0]
    assert len(page.rows) == ui_queries.PAGE_SIZE and not page.first and not page.last
    index, search = (("tag_pushed_idx", "INDEX tag_pushed_idx (repository_id=? AND") if sort == "recent" else
                     ("tag_name_bytes", "sqlite_autoindex_registry_tag_1 (repository_id=? AND name"))
    statements = _statements(lambda: ui_queries.tags(info, *(("", cursor) if backwards else (cursor, "")), sort))
    paging = [sql for sql in statements if "registry_tag" in sql and "ORDER BY" in sql]
    assert len(paging) == 1
    if POSTGRES:
        _check_postgres(paging[0], index)
    else:
        _check_sqlite(paging[0], search)


@pytest.mark.parametrize("sort", ["name", "recent"])
@pytest.mark.parametrize("backwards", [False, True])
def test_a_later_repository_page_reads_the_index_from_its_cursor(big, sort: str, backwards: bool) -> None:
    repositories = Repository.objects.all()
    if sort == "name":
        cursor = repositories.alias(key=byte_order("name")).order_by("key").values_list("name", flat=True)[TAGS // 20]
    else:
        moment, pk = repositories.order_by("-pushed_at", "-id").values_list("pushed_at", "id")[TAGS // 20]
        cursor = f"{seek.moment_text(moment)}.{pk}"
    where = ("", cursor) if backwards else (cursor, "")
    page = ui_queries.repositories("", *where, sort)[0]
    assert len(page.rows) == ui_queries.PAGE_SIZE and not page.first and not page.last
    index, search = (("repository_name_bytes", "INDEX sqlite_autoindex_registry_repository_1 (name") if sort == "name"
                     else ("repository_pushed_idx", "INDEX repository_pushed_idx (pushed_at"))
    statements = _statements(lambda: ui_queries.repositories("", *where, sort))
    paging = [sql for sql in statements if sql.startswith('SELECT "registry_repository"."id"') and "ORDER BY" in sql]
    assert len(paging) == 1
    if POSTGRES:
        _check_postgres(paging[0], index)
    else:
        _check_sqlite(paging[0], search)


@pytest.mark.parametrize("discount", [False, True])
def test_the_collectors_check_of_the_big_repositorys_links_builds_no_index(big, discount: bool) -> None:
    # The range holding only the big repository: SQLite anti-joined its links against an index it
    # built of all the repository's references, n log n with a temporary file (issue 25: 35-56 ms
    # at 10,000 images, 0.85-1.2 s at 100,000); it now reads both in (repository, digest) order.
    # PostgreSQL anti-joins them by a hash or a merge of its own.
    big_id = Repository.objects.get(name=content.BIG).id
    [(low, high)] = [(low, high) for low, high in queries.link_ranges(2000) if low <= big_id <= high]
    if discount:
        queries.hold_doomed([Manifest.objects.filter(repository_id=big_id).order_by("id").first().id])
    try:
        with queries.range_plans():
            statements = _statements(lambda: queries.unreferenced_links(low, high, timezone.now(), discount=discount))
            plans = []
            for sql in statements:
                with connection.cursor() as cursor:
                    cursor.execute(f"EXPLAIN {sql}" if POSTGRES else f"EXPLAIN QUERY PLAN {sql}")
                    plans.append("\n".join(str(row[-1]) for row in cursor.fetchall()))
    finally:
        queries.forget_doomed()
    shown = "\n\n".join(plans)
    if POSTGRES:
        assert "Hash Anti Join" in shown or "Merge Anti Join" in shown, shown
    else:
        assert "AUTOMATIC" not in shown, shown


def test_the_collectors_candidate_page_reads_the_rows_of_untagged_manifests_only(big) -> None:
    # A --delete-untagged collection walks a repository's manifests in push order for those no
    # tag keeps. SQLite tested each manifest's age from its row before probing its tags: it read
    # every row of the big repository (its body too), 0.38 s of a 100,000-image dry run's 2.6.
    # The age is now asked after the tag probe, so only the untagged rows are read.
    big_id = Repository.objects.get(name=content.BIG).id
    roots = reachability.untagged_roots(timezone.now())
    first = reachability.candidates(big_id, roots)
    statements = _statements(lambda: reachability.candidates(big_id, roots, first[-1]))
    assert len(statements) == 1
    if POSTGRES:  # a page of 200 untagged manifests: 2,000 of the big repository's, each probed for tags
        _check_postgres(statements[0], "manifest_pushed_idx", bound=40 * reachability.PAGE)
        return
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {statements[0]}")
        steps = [row[-1] for row in cursor.fetchall()]
    shown = "\n".join(steps)
    # Along the push-order index from the page before, with no sort: a page's deletions then lie
    # together in the table and its indexes (registry.queries.graph.candidate_page).
    assert "manifest_pushed_idx (repository_id=? AND " in steps[0] and "TEMP B-TREE" not in shown, shown
    tag_probe = next(n for n, step in enumerate(steps) if "registry_tag_manifest_id" in step)
    row_reads = [n for n, step in enumerate(steps) if "INTEGER PRIMARY KEY" in step]
    assert row_reads and min(row_reads) > tag_probe, shown
