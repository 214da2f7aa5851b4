"""Ops endpoints: liveness, readiness, Prometheus metrics and the API documentation."""
from __future__ import annotations

import functools
import json
from typing import Any, Callable

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render

from ops import metrics, readiness
from tokens.access import public

View = Callable[..., HttpResponse]


def read_only(view: View) -> View:
    """GET and HEAD only; anything else is a 405 with a JSON error and an Allow header."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            response: HttpResponse = JsonResponse(
                {"error": f"method {request.method} is not allowed; use GET"}, status=405)
            response["Allow"] = "GET, HEAD"
            return response
        response = view(request, *args, **kwargs)
        response["Cache-Control"] = "no-store"
        return response

    return wrapper


@public
@read_only
def to_ui(request: HttpRequest) -> HttpResponse:
    # The address people type goes to the web UI; a temporary redirect, so that browsers do not
    # remember it should / ever serve something else.
    query = request.META.get("QUERY_STRING", "")
    return HttpResponseRedirect("/ui/" + (f"?{query}" if query else ""))


@public
@read_only
def health(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


@public
@read_only
def ready(request: HttpRequest) -> HttpResponse:
    results = readiness.run()
    failing = [name for name, result in results.items() if result != "ok" and name not in readiness.INFORMATIONAL]
    if failing:
        return JsonResponse({"status": "unavailable", "checks": results, "failing": failing}, status=503)
    return JsonResponse({"status": "ready", "checks": results})


@public
@read_only
def prometheus_metrics(request: HttpRequest) -> HttpResponse:
    return HttpResponse(metrics.exposition(), content_type=metrics.CONTENT_TYPE)


@public
@read_only
def openapi_document(request: HttpRequest) -> HttpResponse:
    from ops import openapi  # the API description is built when first asked for, not in every worker

    return JsonResponse(openapi.document(), json_dumps_params={"indent": 1})


@public
@read_only
def api_docs(request: HttpRequest) -> HttpResponse:
    from ops import openapi

    return render(request, "ops/api_docs.html", {"operations": openapi.operations()})


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's handler500: a failure outside a view (in a middleware) still answers in the shape the
    client reads: the OCI envelope on /v2/, the token API's ``{"error"}`` elsewhere."""
    import sys

    from registry import errors

    error = sys.exc_info()[1] or RuntimeError("unknown failure")
    response = errors.failure_response(request, error)
    if not request.path.startswith("/v2"):
        body = json.loads(response.content)["errors"][0]
        response = JsonResponse({"error": body["message"]}, status=response.status_code)
    return response
