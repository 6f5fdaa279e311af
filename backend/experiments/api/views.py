"""Researcher API: experiments, sweeps (create, progress, cancel, re-run), job types.

A sweep's results (aggregate, findings, tables, export) and the trials with what they produced are
the ``results`` app's API (``results.api``), on the same /api/sweeps/ and /api/trials/ paths.
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.permissions import IsResearcher
from experiments import archiving, jobtypes, lifecycle, link_traces, services
from experiments.api.serializers import (
    CancelReplySerializer,
    ExperimentSerializer,
    JobTypeSerializer,
    LinkTraceSerializer,
    LinkTraceUploadSerializer,
    ProgressSerializer,
    RerunReplySerializer,
    SweepSerializer,
    SweepSpecSerializer,
)
from experiments.models import Experiment, LinkTrace, Sweep
from qoelab_web.api import DetailSerializer, ErrorSerializer, errors_response, int_param

LISTED_SWEEP_FIELDS = (
    *(f.name for f in Sweep._meta.concrete_fields),
    "experiment__name",
    "created_by__username",
)


def _archived(qs: QuerySet, request: Request, field_path: str = "archived_at") -> QuerySet:
    """A list's ``archived`` filter: false (default: current only), true (archived only) or all."""
    try:
        archived = archiving.parse_archived(request.query_params.get("archived"))
    except ValueError as exc:
        raise ValidationError({"archived": [str(exc)]}) from None
    return archiving.filter_archived(qs, archived, field_path)


def _refused(exc: lifecycle.Refused) -> Response:
    return Response({"detail": " ".join(exc.reasons)}, status=status.HTTP_409_CONFLICT)


ARCHIVED_PARAM = OpenApiParameter(
    "archived",
    str,
    enum=["false", "true", "all"],
    description="false (default): current only; true: archived only; all: both",
)


@extend_schema(tags=["experiments"])
@extend_schema_view(
    list=extend_schema(
        parameters=[OpenApiParameter("job_type", str, description="only this job type"), ARCHIVED_PARAM]
    ),
    create=extend_schema(responses={201: ExperimentSerializer, 400: ErrorSerializer}),
    update=extend_schema(responses={200: ExperimentSerializer, 400: ErrorSerializer}),
    partial_update=extend_schema(responses={200: ExperimentSerializer, 400: ErrorSerializer}),
    destroy=extend_schema(responses={204: None, 409: DetailSerializer}),
)
class ExperimentViewSet(viewsets.ModelViewSet):
    """Your experiments (staff see all)."""

    queryset = Experiment.objects.none()
    serializer_class = ExperimentSerializer
    permission_classes = [IsResearcher]

    def get_queryset(self) -> QuerySet:
        qs = Experiment.objects.select_related("owner").visible_to(self.request.user)
        if job_type := self.request.query_params.get("job_type"):
            qs = qs.filter(job_type=job_type)
        if self.action == "list":  # an archived experiment stays reachable by its id
            qs = _archived(qs, self.request)
        return qs

    def perform_create(self, serializer: ExperimentSerializer) -> None:
        serializer.save(owner=self.request.user)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Delete the experiment, its sweeps, trials and artifact files (and rating campaigns without
        ratings that use its recordings); 409 names what is in the way (the dashboard's rules)."""
        experiment = self.get_object()
        try:
            lifecycle.delete(lifecycle.plan_experiment_delete(experiment, request.user), request.user)
        except lifecycle.Refused as exc:
            return _refused(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={200: ExperimentSerializer}, summary="Hide from the default lists")
    @action(detail=True, methods=["post"])
    def archive(self, request: Request, pk: str | None = None) -> Response:
        experiment = archiving.set_experiment_archived(self.get_object(), True)
        return Response(ExperimentSerializer(experiment, context=self.get_serializer_context()).data)

    @extend_schema(request=None, responses={200: ExperimentSerializer}, summary="Back into the default lists")
    @action(detail=True, methods=["post"])
    def unarchive(self, request: Request, pk: str | None = None) -> Response:
        experiment = archiving.set_experiment_archived(self.get_object(), False)
        return Response(ExperimentSerializer(experiment, context=self.get_serializer_context()).data)


@extend_schema(tags=["sweeps"])
@extend_schema_view(
    list=extend_schema(
        parameters=[
            OpenApiParameter("experiment", int, description="only this experiment"),
            OpenApiParameter(
                "archived",
                str,
                enum=["false", "true", "all"],
                description="by the experiment's archive state; false (default): current only; "
                "true: archived only; all: both",
            ),
        ]
    ),
    create=extend_schema(
        request=SweepSpecSerializer,
        responses={201: SweepSerializer, 400: ErrorSerializer},
        summary="Validate a sweep spec and create all its trials (nothing is created on error)",
    ),
    destroy=extend_schema(
        responses={204: None, 409: DetailSerializer},
        summary="Delete the sweep, its trials and artifact files (409 names what is in the way)",
    ),
)
class SweepViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Sweeps of your experiments with their progress."""

    queryset = Sweep.objects.none()
    serializer_class = SweepSerializer
    permission_classes = [IsResearcher]

    def get_queryset(self) -> QuerySet:
        qs = Sweep.objects.select_related("experiment", "created_by").visible_to(self.request.user)
        if (exp := int_param(self.request, "experiment")) is not None:
            qs = qs.filter(experiment_id=exp)
        if self.action == "list":  # a sweep of an archived experiment stays reachable by its id
            qs = _archived(qs, self.request, "experiment__archived_at")
            # What SweepSerializer reads of the joined rows: whole user and experiment rows cost
            # model building per sweep on a 100-sweep page (issue 33).
            qs = qs.only(*LISTED_SWEEP_FIELDS)
        if self.action == "progress":  # polled by every open sweep page: read only what it needs
            qs = qs.select_related(None).only("id", "job_type", "cancelled_at")
        return qs

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # The page's progress in a fixed number of queries, not two or more per sweep (issue 33).
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        assert page is not None  # DEFAULT_PAGINATION_CLASS is always set
        context = {**self.get_serializer_context(), "progress": services.progress_many(page)}
        return self.get_paginated_response(SweepSerializer(page, many=True, context=context).data)

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        try:
            sweep = services.create_sweep(request.data, request.user)
        except services.SpecError as exc:
            return errors_response(exc.errors)
        return Response(SweepSerializer(sweep, context=self.get_serializer_context()).data, status=201)

    @extend_schema(
        responses={200: ProgressSerializer},
        summary="Progress only: what an open sweep page polls (shared for QOELAB_PROGRESS_CACHE_S)",
    )
    @action(detail=True, methods=["get"])
    def progress(self, request: Request, pk: str | None = None) -> Response:
        sweep = self.get_object()
        return Response(services.progress_for_polling(sweep))

    @extend_schema(
        request=None, responses={200: CancelReplySerializer}, summary="Stop queued and pending trials"
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        sweep = self.get_object()
        n = services.cancel_sweep(sweep)
        return Response(
            {
                "cancelled_trials": n,
                "sweep": SweepSerializer(sweep, context=self.get_serializer_context()).data,
            }
        )

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        sweep = self.get_object()
        try:
            lifecycle.delete(lifecycle.plan_sweep_delete(sweep, request.user), request.user)
        except lifecycle.Refused as exc:
            return _refused(exc)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=None,
        responses={200: RerunReplySerializer, 409: DetailSerializer},
        summary="Put the failed trials back to pending with fresh attempts (their history stays)",
    )
    @action(detail=True, methods=["post"])
    def rerun_failed(self, request: Request, pk: str | None = None) -> Response:
        """409 for a cancelled sweep (clone it instead) or a job type this backend does not know."""
        sweep = self.get_object()
        try:
            n = lifecycle.rerun_failed(sweep, request.user)
        except lifecycle.Refused as exc:
            return _refused(exc)
        return Response(
            {"requeued": n, "sweep": SweepSerializer(sweep, context=self.get_serializer_context()).data}
        )


@extend_schema(tags=["job types"])
class JobTypeViewSet(viewsets.ViewSet):
    """Job types registered in the worker library (qoelab.jobs): parameters, metrics, charts."""

    permission_classes = [IsResearcher]
    lookup_field = "name"
    lookup_value_regex = r"[A-Za-z0-9_.-]+"

    @extend_schema(responses={200: JobTypeSerializer(many=True)})
    def list(self, request: Request) -> Response:
        return Response([jobtypes.describe(j) for _, j in sorted(jobtypes.registry().items())])

    @extend_schema(responses={200: JobTypeSerializer, 404: DetailSerializer})
    def retrieve(self, request: Request, name: str | None = None) -> Response:
        job = jobtypes.get_job(name or "")
        if job is None:
            raise NotFound(f"unknown job type {name!r} (known: {jobtypes.known_names()})")
        return Response(jobtypes.describe(job))


@extend_schema(tags=["link traces"])
class LinkTraceViewSet(viewsets.ViewSet):
    """Link traces for ``link_trace`` / ``up_link_trace``: the library's and the ones you uploaded
    (``upload:N``). An upload is checked at once; a bad line is refused naming it."""

    permission_classes = [IsResearcher]
    lookup_value_regex = r"[0-9]{1,12}"
    max_json_bytes = 2 * link_traces.traces.MAX_TRACE_BYTES  # the text, with JSON's escapes

    def _mine(self) -> QuerySet:
        return LinkTrace.objects.select_related("owner").visible_to(self.request.user)

    @extend_schema(responses={200: LinkTraceSerializer(many=True)})
    def list(self, request: Request) -> Response:
        """Your uploaded traces (staff: everyone's), newest first."""
        return Response([link_traces.describe(t) for t in self._mine()])

    @extend_schema(responses={200: LinkTraceSerializer, 404: DetailSerializer})
    def retrieve(self, request: Request, pk: str | None = None) -> Response:
        trace = self._mine().filter(pk=int(pk or 0)).first()
        if trace is None:
            raise NotFound(f"no uploaded trace {pk} of yours")
        return Response(link_traces.describe(trace))

    @extend_schema(
        request=LinkTraceUploadSerializer,
        responses={200: LinkTraceSerializer, 201: LinkTraceSerializer, 400: ErrorSerializer},
    )
    def create(self, request: Request) -> Response:
        """Upload a trace; 201 with its ``ref``, or 200 with the one you uploaded before (same text)."""
        ser = LinkTraceUploadSerializer(data=request.data)
        ser.is_valid(raise_exception=True)
        try:
            trace, new = link_traces.upload(
                request.user, ser.validated_data["name"], ser.validated_data["text"]
            )
        except link_traces.TraceRefused as exc:
            raise ValidationError({exc.field: [exc.message]}) from None
        return Response(
            link_traces.describe(trace), status=status.HTTP_201_CREATED if new else status.HTTP_200_OK
        )

    @extend_schema(responses={200: LinkTraceSerializer(many=True)})
    @action(detail=False, methods=["get"])
    def library(self, request: Request) -> Response:
        """The traces shipped with the lab (their ``ref`` is their name)."""
        return Response(link_traces.library())
