"""The retention planner on its own (no database, a fixed clock): which tags a rule removes and
why, and which manifests the next collection then removes."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from registry.policies.rules import immutable_rule, retention_rule
from registry.retention.planner import ManifestState, Snapshot, TagState, collectable, plan

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)
DAY = timedelta(days=1)


def _rule(**keys: object):  # type: ignore[no-untyped-def]
    return retention_rule(0, {"repositories": "team/*", **keys})


class Repo:
    """Builds a snapshot: images pushed ``age`` ago, tags, indexes and referrers."""

    def __init__(self) -> None:
        self.tags: list[TagState] = []
        self.manifests: list[ManifestState] = []
        self.children: dict[int, tuple[str, ...]] = {}

    def manifest(self, age: timedelta, subject: str = "", pulled: timedelta | None = None,
                 children: tuple[str, ...] = ()) -> str:
        mid = len(self.manifests) + 1
        digest = f"sha256:{mid:064x}"
        self.manifests.append(ManifestState(mid, digest, subject, NOW - age, None if pulled is None else NOW - pulled))
        if children:
            self.children[mid] = children
        return digest

    def tag(self, name: str, digest: str, age: timedelta | None = None) -> None:
        mid = self.id(digest)
        pushed = NOW - age if age is not None else self.manifests[mid - 1].pushed_at
        self.tags.append(TagState(len(self.tags) + 100, name, mid, pushed))

    def image(self, name: str, age: timedelta, pulled: timedelta | None = None) -> str:
        digest = self.manifest(age, pulled=pulled)
        self.tag(name, digest)
        return digest

    def id(self, digest: str) -> int:
        return int(digest.split(":")[1], 16)

    def snapshot(self) -> Snapshot:
        return Snapshot("team/app", tuple(self.tags), tuple(self.manifests), dict(self.children))


def _removed_tags(result) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(r.tag.name for r in result.tags)


def test_keep_last_keeps_the_newest_tags_and_the_rest_go_with_their_reason() -> None:
    repo = Repo()
    for i in range(15):
        repo.image(f"t{i:02d}", (30 - i) * DAY)
    result = plan(repo.snapshot(), _rule(keep_last=10), None, NOW)
    assert _removed_tags(result) == ["t00", "t01", "t02", "t03", "t04"]
    assert result.tags[0].reason == ('[[retention]] #1 "team/*": not among the 10 most recently pushed tags '
                                     "(keep_last = 10; it is #15)")
    assert [r.manifest.digest for r in result.manifests] == [repo.manifests[i].digest for i in range(5)]
    assert result.manifests[0].reason == '[[retention]] #1 "team/*": its tags go (t00), pushed 30 days ago'


def test_each_clause_keeps_a_tag_keep_tags_pulls_immutable_and_recent_pushes() -> None:
    repo = Repo()
    for i in range(6):
        repo.image(f"old{i}", (100 + i) * DAY)
    repo.image("v1.2.3", 200 * DAY)                      # keep_tags
    repo.image("pulled", 150 * DAY, pulled=3 * DAY)      # pulled within 30 days
    repo.image("prod-1", 300 * DAY)                      # immutable
    repo.image("fresh", 2 * DAY)                         # pushed within 30 days (and newest)
    rule = _rule(keep_last=2, keep_tags=[r"^v[0-9]+\.[0-9]+\.[0-9]+$"], pulled_within_days=30)
    result = plan(repo.snapshot(), rule, immutable_rule(0, {"repositories": "team/*", "tags": ["^prod-"]}), NOW)
    assert _removed_tags(result) == ["old1", "old2", "old3", "old4", "old5"]  # fresh and old0: the 2 newest
    reason = next(r.reason for r in result.tags if r.tag.name == "old5")
    assert reason == ('[[retention]] #1 "team/*": not among the 2 most recently pushed tags (keep_last = 2; '
                      "it is #7); neither pushed nor pulled within 30 days (pulled_within_days = 30; pushed 105 "
                      "days ago, never pulled)")


def test_a_rule_without_keep_last_or_pulled_within_days_removes_no_tag() -> None:
    repo = Repo()
    for i in range(5):
        repo.image(f"t{i}", 400 * DAY)
    assert plan(repo.snapshot(), _rule(keep_tags=["^x$"]), None, NOW).tags == []


def test_untagged_manifests_go_after_untagged_after_hours_unless_pulled() -> None:
    repo = Repo()
    old = repo.manifest(80 * timedelta(hours=1))
    young = repo.manifest(70 * timedelta(hours=1))
    pinned = repo.manifest(90 * DAY, pulled=DAY)  # a deployment pulling it by digest
    result = plan(repo.snapshot(), _rule(untagged_after_hours=72, pulled_within_days=7), None, NOW)
    assert [r.manifest.digest for r in result.manifests] == [old]
    assert result.manifests[0].reason == ('[[retention]] #1 "team/*": untagged, pushed 3 days ago '
                                          "(untagged_after_hours = 72)")
    assert young not in collectable(repo.snapshot(), _rule(untagged_after_hours=72), None, NOW).values()
    assert pinned in collectable(repo.snapshot(), _rule(untagged_after_hours=72), None, NOW).values()


def test_a_kept_index_keeps_its_children_and_a_removed_index_takes_its_own() -> None:
    repo = Repo()
    shared = repo.manifest(60 * DAY)
    kept_child = repo.manifest(60 * DAY)
    gone_child = repo.manifest(60 * DAY)
    kept = repo.manifest(60 * DAY, children=(shared, kept_child))
    repo.tag("new", kept, age=DAY)
    gone = repo.manifest(60 * DAY, children=(shared, gone_child))
    repo.tag("old", gone, age=50 * DAY)
    result = plan(repo.snapshot(), _rule(keep_last=1), None, NOW)
    assert _removed_tags(result) == ["old"]
    going = {r.manifest.digest: r.reason for r in result.manifests}
    assert set(going) == {gone, gone_child}
    assert going[gone_child].endswith(f"listed only by index {gone}, which goes")


def test_referrers_stay_with_a_kept_subject_and_go_with_a_removed_one_tags_included() -> None:
    repo = Repo()
    kept = repo.image("new", DAY)
    gone = repo.image("old", 90 * DAY)
    kept_signature = repo.manifest(80 * DAY, subject=kept)
    gone_signature = repo.manifest(2 * timedelta(hours=1), subject=gone)  # young, still goes
    gone_sbom_of_signature = repo.manifest(timedelta(hours=1), subject=gone_signature)
    repo.tag(f"sha256-{gone.split(':')[1]}.sig", gone_signature)  # cosign's tag schema: not counted
    repo.tag(f"sha256-{kept.split(':')[1]}.sig", kept_signature)
    dangling = repo.manifest(100 * DAY, subject="sha256:" + "f" * 64)  # subject not here: plain untagged
    result = plan(repo.snapshot(), _rule(keep_last=1), None, NOW)
    assert _removed_tags(result) == ["old", f"sha256-{gone.split(':')[1]}.sig"]
    going = {r.manifest.digest: r.reason for r in result.manifests}
    assert set(going) == {gone, gone_signature, gone_sbom_of_signature, dangling}
    assert going[gone_signature] == f'[[retention]] #1 "team/*": a referrer of {gone}, which goes'
    assert kept_signature not in going


def test_immutable_tags_are_never_removed_and_keep_their_images() -> None:
    repo = Repo()
    for i in range(5):
        repo.image(f"v{i}", (50 + i) * DAY)
    immutable = immutable_rule(0, {"repositories": "team/*", "tags": ["^v[0-2]$"]})
    result = plan(repo.snapshot(), _rule(keep_last=1, pulled_within_days=1), immutable, NOW)
    assert _removed_tags(result) == ["v3", "v4"]
    assert len(result.manifests) == 2


def test_collectable_without_tag_removal_keeps_everything_tagged() -> None:
    repo = Repo()
    for i in range(5):
        repo.image(f"t{i}", 400 * DAY)
    assert collectable(repo.snapshot(), _rule(keep_last=1), None, NOW) == {}
