"""Browse pages: overview, repositories, one repository, one manifest; deleting tags and manifests."""
from __future__ import annotations

from typing import Callable
from urllib.parse import urlencode

from django.conf import settings
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from audit import log as audit
from ops.ui import policies, queries, seek
from ops.ui.access import UiRequest, error_page, not_found, page, ui_view
from ops.ui.configs import read_config
from ops.ui.format import mirror_of
from ops.ui.forms import RepositoryDeleteForm
from ops.ui.manifests import summarize
from registry.digests import Digest, is_digest_like
from registry.policies.immutable import immutable_tags
from registry.names import is_valid_name, is_valid_tag
from registry.proxy.mirrors import find as find_mirror
from registry.services import manifests, repositories
from registry.services.exceptions import DeleteDisabled, NameUnknown
from tokens.access import Action


def _deleted(request: HttpRequest, valid: Callable[[str], bool]) -> str:
    """What the redirect after a delete names; anything else is ignored, so that a crafted link
    cannot make the page announce made-up text."""
    value = request.GET.get("deleted", "")
    return value if value and len(value) <= 300 and valid(value) else ""


def _deleted_reference(value: str) -> bool:
    kind, _, reference = value.partition(" ")
    return (kind == "tag" and is_valid_tag(reference)) or (
        kind == "manifest" and Digest.parse_or_none(reference) is not None
    )


def _choice(request: HttpRequest, key: str, allowed: tuple[str, ...]) -> str:
    value = request.GET.get(key, "")
    return value if value in allowed else allowed[0]


def _mirror(name: str, repository_id: int | None = None) -> dict[str, object] | None:
    """What the pages show of a pull-through cache's repository (or manifest): its upstream and,
    for a repository, its last pull (a manifest page shows its own, as for any manifest)."""
    if find_mirror(name) is None:
        return None
    last = queries.last_pulled(repository_id) if repository_id is not None else None
    return {"upstream": mirror_of(name), "last_pulled": last}


def _refuse_mirror(name: str) -> None:
    mirror = find_mirror(name)
    if mirror is not None:
        raise mirror.read_only()


@ui_view("GET")
def home(request: UiRequest) -> HttpResponse:
    visible = request.viewer.visible
    # Quota usage adds up repositories across the registry: shown to those who may read them all.
    return page(request, "home.html", {"nav": "home", "overview": queries.overview(visible),
                                       "quotas": policies.all_quotas() if visible.everything else []})


def _numbered(request: HttpRequest) -> HttpResponse | None:
    """A link of the numbered pages before keyset pages (``?page=N``): the list from its start.
    Page N of a list that moves with every push was never a stable address; a cursor is."""
    if "page" not in request.GET:
        return None
    kept = request.GET.copy()
    del kept["page"]
    return HttpResponseRedirect(f"{request.path}?{kept.urlencode()}" if kept else request.path)


def _bad_cursor(request: UiRequest) -> HttpResponse:
    return error_page(request, 400, "This page link is not valid",
                      "The link's place in the list (after= or before=) was not made by this list: it may "
                      "have been cut short or edited. Open the list from its first page.")


@ui_view("GET")
def repository_list(request: UiRequest) -> HttpResponse:
    numbered = _numbered(request)
    if numbered is not None:
        return numbered
    search = request.GET.get("q", "").strip()[:255]
    sort = _choice(request, "sort", ("name", "recent"))
    try:
        listing, rows, counted_at = queries.repositories(search, request.GET.get("after", ""),
                                                         request.GET.get("before", ""), sort, request.viewer.visible)
    except seek.BadCursor:
        return _bad_cursor(request)
    more = queries.SEARCH_COUNT if search and listing.total > queries.SEARCH_COUNT else 0
    return page(request, "repositories.html", {
        "nav": "repositories", "page": listing, "rows": rows, "q": search, "sort": sort, "more": more,
        "counted_at": counted_at,
        "deleted": _deleted(request, is_valid_name),
    })


@ui_view("GET")
def repository_detail(request: UiRequest, name: str) -> HttpResponse:
    _readable(request, name)
    numbered = _numbered(request)
    if numbered is not None:
        return numbered
    info = queries.repository(name)
    sort = _choice(request, "sort", ("recent", "name"))
    try:
        listing, tags = queries.tags(info, request.GET.get("after", ""), request.GET.get("before", ""), sort)
    except seek.BadCursor:
        return _bad_cursor(request)
    untagged_total, untagged = queries.untagged(info) if listing.first else (0, [])
    # One reversal for the page, not three for each of its up to 150 rows: a tag or a digest needs
    # no quoting in a path, and reversing was a third of the page's time.
    manifests = reverse("ui:manifest", args=[info.name, "-"])[:-1]
    return page(request, "repository.html", {
        "nav": "repositories", "repo": info, "page": listing, "tags": tags, "sort": sort, "manifests": manifests,
        "untagged_total": untagged_total, "untagged": untagged, "untagged_scan": queries.UNTAGGED_SCAN,
        "untagged_limit": queries.UNTAGGED_LIMIT,
        "deleted": _deleted(request, _deleted_reference), "rules": policies.for_repository(info.name),
        "mirror": _mirror(name, info.id), "may_delete": request.viewer.may_delete(name),
    })


@ui_view("GET")
def manifest_detail(request: UiRequest, name: str, reference: str) -> HttpResponse:
    _readable(request, name)
    info = queries.manifest(name, reference)
    summary = summarize(info.body, info.media_type)
    config = read_config(name, summary.config, summary.layers) if summary.config and summary.is_image else None
    # A manifest may list up to [registry] max_descriptors entries: the page shows them in pages.
    listed = Paginator(summary.children or summary.layers,
                       settings.UI_MANIFEST_ENTRIES_PER_PAGE).get_page(request.GET.get("page"))
    children = list(listed.object_list) if summary.is_index else []
    linked = queries.present(info.repository_id, [c.digest for c in children] + [summary.subject])
    return page(request, "manifest.html", {
        "nav": "repositories", "info": info, "summary": summary, "config": config,
        "reference": reference, "tag": "" if is_digest_like(reference) else reference,
        "referrers": queries.referrers(info), "parents": queries.parents(info),
        "page": listed, "layers": [] if summary.is_index else list(listed.object_list),
        "first_number": listed.start_index(),
        "children": [{"child": c, "stored": c.digest in linked, "content_size": linked.get(c.digest)}
                     for c in children],
        "subject_stored": summary.subject in linked,
        "immutable_tags": sorted(immutable_tags(name, info.tags)), "mirror": _mirror(name),
        "may_delete": request.viewer.may_delete(name),
    })


@ui_view("GET", "POST")
def delete_manifest(request: UiRequest, name: str, reference: str) -> HttpResponse:
    """GET asks for confirmation; POST deletes. A tag deletes only the tag, a digest the manifest."""
    if not request.viewer.can_delete:
        raise DeleteDisabled("deletes are disabled")
    _readable(request, name)
    refused = _may_not_delete(request, name, reference)
    if refused is not None:
        return refused
    _refuse_mirror(name)
    info = queries.manifest(name, reference)
    by_digest = is_digest_like(reference)
    if request.method == "POST":
        manifests.delete(name, reference, settings.REGISTRY_DELETE_ENABLED)
        audit.record("delete" if by_digest else "tag.delete", repository=name,
                     reference="" if by_digest else reference, digest=info.digest, detail="from the web UI")
        done = f"manifest {info.digest}" if by_digest else f"tag {reference}"
        target = reverse("ui:repository", args=[name])
        return HttpResponseRedirect(f"{target}?{urlencode({'deleted': done})}")
    return page(request, "confirm_delete.html", {
        "nav": "repositories", "info": info, "reference": reference, "by_digest": by_digest,
        "referrers": queries.referrers(info) if by_digest else [],
    })


@ui_view("GET", "POST")
def delete_repository(request: UiRequest, name: str) -> HttpResponse:
    """GET asks for the name to be typed again; POST with it deletes the whole repository."""
    if not request.viewer.can_delete:
        raise DeleteDisabled("deletes are disabled")
    _readable(request, name)
    refused = _may_not_delete(request, name)
    if refused is not None:
        return refused
    _refuse_mirror(name)
    info = queries.repository(name)
    form = RepositoryDeleteForm(request.POST if request.method == "POST" else None)
    if form.is_valid():
        if form.cleaned_data["confirm_name"] == info.name:
            deleted = repositories.delete_repository(info.name)
            audit.record("repository.delete", repository=info.name,
                         detail=f"{deleted.tags} tags, {deleted.manifests} manifests, from the web UI")
            return HttpResponseRedirect(f"{reverse('ui:repositories')}?{urlencode({'deleted': info.name})}")
        form.add_error("confirm_name", "That is not the repository's name.")
    return page(request, "confirm_delete_repository.html",
                {"nav": "repositories", "repo": info, "form": form}, 400 if form.errors else 200)


def _readable(request: UiRequest, name: str) -> None:
    """A repository the viewer may not read is not found, as one that does not exist."""
    if not request.viewer.may_read(name):
        raise NameUnknown(f"repository {name!r} not known to registry")


def _may_not_delete(request: UiRequest, name: str, reference: str = "") -> HttpResponse | None:
    """The 403 page of a delete the access decision refuses (recorded in the audit log)."""
    decision = request.viewer.may(name, Action.DELETE)
    if decision.allowed:
        return None
    audit.record("delete", repository=name, reference=reference, outcome=audit.Outcome.DENIED,
                 detail=decision.message)
    return error_page(request, 403, "Not allowed to delete here", decision.message)


@ui_view("GET", "POST", "PUT", "PATCH", "DELETE", browse=False)
def unknown_page(request: HttpRequest, rest: str = "") -> HttpResponse:
    return not_found(request)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """settings.CSRF_FAILURE_VIEW: a form posted without a valid CSRF token (expired or forged)."""
    return error_page(request, 403, "This form could not be verified",
                      "The form was sent without a valid security token: it may have been open for "
                      "too long, or your browser blocks cookies for this site. Go back, reload the "
                      "page and try again.")
