"""Every statement of the registry app, as named functions returning ids or small typed rows, one
module per entity; services call them and read as domain code. What the hand-written statements
share (building them once, the byte-order rule) is in ``_sql``.

    repositories   lookup by name, the ones with content (catalog, UI), deleting one
    blobs          a blob through a repository, linking, mounting, collection and scrub
    manifests      by tag or digest (API and UI), recording pulls, storing, the reference graph
    tags           pointing, listing in byte order, immutable ones, what retention plans over
    referrers      pages of the manifests that name a subject
    uploads        upload sessions and their leases
    locks          named leases and per-digest locks
    quotas         the usage rows of [[quota]] rules, counted again from the links
    proxy          pull-through caches: cached manifests and tags, adopting blobs, eviction
"""
from __future__ import annotations

from registry.queries._sql import byte_order, visible_names
from registry.queries.blobs import (
    BlobRow,
    BlobTotals,
    MountSource,
    QuotaLink,
    StoredBlob,
    blob_count,
    blob_exists,
    blob_page,
    blob_totals,
    delete_blob,
    digests_with_prefix,
    known_digests,
    link_blob,
    linked_blob,
    linked_digests,
    mount_sources,
    quota_links_by_id,
    quota_links_in_repository,
    quota_links_of_blobs,
    quota_links_of_digest,
    repositories_linking,
    repositories_linking_blobs,
    unlink_blob,
)
from registry.queries.collection import (
    LinkRow,
    NamedRepository,
    UnusedBlob,
    blob_ranges,
    delete_blob_rows,
    delete_links,
    forget_doomed,
    hold_doomed,
    link_ranges,
    repositories_with_untagged,
    repository_page,
    range_plans,
    unreferenced_links,
    unused_blobs,
)
from registry.queries.graph import GraphNode, candidate_page, graph_nodes, index_parents, tag_names_of
from registry.queries.locks import (
    acquire_lease,
    delete_free_lease,
    lease_held,
    lock_keys,
    lock_repository,
    release_lease,
    renew_lease,
    set_lease_data,
)
from registry.queries.manifests import (
    ManifestDetails,
    ManifestNode,
    ManifestRow,
    delete_manifest,
    delete_manifests,
    index_children,
    insert_manifest,
    manifest_by_digest,
    manifest_by_tag,
    manifest_details,
    manifest_id,
    manifest_nodes,
    stored_manifests,
    touch_pulled,
)
from registry.queries.proxy import (
    CachedManifest,
    cached_manifest,
    listed_by_others,
    mark_tag_checked,
    point_cached_tag,
    references_blob,
    stale_manifests,
    still_stale,
    stored_blob_size,
)
from registry.queries.quotas import (
    QuotaRow,
    add_quota,
    create_quota,
    delete_quota_rows_except,
    lock_quota,
    quota_rows,
    set_quota,
    usage_of,
)
from registry.queries.referrers import ReferrerRow, annotations_of, referrer_rows
from registry.queries.retention import (
    Doomed,
    Kept,
    Removal,
    TagLine,
    add_doomed,
    add_kept,
    add_removals,
    clear_doomed,
    doomed_among,
    doomed_by_push,
    kept_by_push,
    plan_tables,
    removals_by_name,
    removed_names,
    tags_newest_first,
    tags_of_manifests,
)
from registry.queries.repositories import (
    RemovedRows,
    RepositoryRow,
    catalog_names,
    create_repository,
    delete_repository,
    find_repository,
    probe_registry_table,
    takes_writes,
    with_content,
)
from registry.queries.tallies import (
    BIG_REPOSITORY,
    biggest_table_rows,
    claim_tally,
    read_tally,
    registry_totals,
    release_tally,
    repositories_matching,
    repository_figures,
    repository_totals,
    store_tally,
    untagged_count,
    visible_totals,
)
from registry.queries.tags import (
    TagRow,
    delete_tag,
    delete_tags_by_id,
    insert_tags_if_absent,
    point_tags,
    tag_names,
    tag_rows,
    tag_digests,
    tag_targets,
    tags_for_removal,
    tags_of,
    tags_of_digest,
    tags_reaching,
)
from registry.queries.uploads import (
    Session,
    acquire_session,
    count_live_sessions,
    delete_idle_session,
    delete_session,
    idle_sessions,
    insert_session,
    known_sessions,
    multipart_upload_ids,
    read_session,
    release_session,
    renew_session,
    save_session,
    session_storage_state,
    take_over_session,
)

__all__ = [
    # _sql
    "byte_order", "visible_names",
    # blobs
    "BlobRow", "BlobTotals", "MountSource", "QuotaLink", "StoredBlob", "blob_count", "blob_exists",
    "blob_page", "blob_totals", "delete_blob",
    "digests_with_prefix", "known_digests", "link_blob", "linked_blob", "linked_digests",
    "mount_sources", "quota_links_by_id", "quota_links_in_repository", "quota_links_of_blobs",
    "quota_links_of_digest", "repositories_linking", "repositories_linking_blobs", "unlink_blob",
    # collection
    "LinkRow", "NamedRepository", "UnusedBlob", "blob_ranges", "delete_blob_rows", "delete_links", "forget_doomed",
    "hold_doomed", "link_ranges", "repositories_with_untagged", "repository_page", "range_plans",
    "unreferenced_links", "unused_blobs",
    # graph
    "GraphNode", "candidate_page", "graph_nodes", "index_parents", "tag_names_of",
    # locks
    "acquire_lease", "delete_free_lease", "lease_held", "lock_keys", "lock_repository", "release_lease", "renew_lease",
    "set_lease_data",
    # manifests
    "ManifestDetails", "ManifestNode", "ManifestRow",
    "delete_manifest", "delete_manifests", "index_children", "insert_manifest",
    "manifest_by_digest", "manifest_by_tag", "manifest_details", "manifest_id", "manifest_nodes",
    "stored_manifests", "touch_pulled",
    # proxy
    "CachedManifest", "cached_manifest", "listed_by_others", "mark_tag_checked", "point_cached_tag",
    "references_blob", "stale_manifests", "still_stale", "stored_blob_size",
    # quotas
    "QuotaRow", "add_quota", "create_quota", "delete_quota_rows_except", "lock_quota", "quota_rows", "set_quota",
    "usage_of",
    # referrers
    "ReferrerRow", "annotations_of", "referrer_rows",
    # retention
    "Doomed", "Kept", "Removal", "TagLine", "add_doomed", "add_kept", "add_removals", "clear_doomed", "doomed_among",
    "doomed_by_push", "kept_by_push", "plan_tables", "removals_by_name", "removed_names", "tags_newest_first",
    "tags_of_manifests",
    # repositories
    "RemovedRows", "RepositoryRow", "catalog_names", "create_repository",
    "delete_repository", "find_repository", "probe_registry_table", "takes_writes", "with_content",
    # tallies
    "BIG_REPOSITORY", "biggest_table_rows", "claim_tally", "read_tally", "registry_totals", "release_tally",
    "repositories_matching", "repository_figures", "repository_totals", "store_tally",
    "untagged_count", "visible_totals",
    # tags
    "TagRow", "delete_tag", "delete_tags_by_id", "insert_tags_if_absent", "point_tags", "tag_names", "tag_rows",
    "tag_digests", "tag_targets", "tags_for_removal", "tags_of", "tags_of_digest", "tags_reaching",
    # uploads
    "Session", "acquire_session", "count_live_sessions", "delete_idle_session", "delete_session", "idle_sessions",
    "insert_session", "known_sessions", "multipart_upload_ids", "read_session", "release_session", "renew_session",
    "save_session", "session_storage_state", "take_over_session",
]
