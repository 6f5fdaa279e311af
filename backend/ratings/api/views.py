"""Ratings API: researchers' campaigns (owner-only) and the evaluator's own endpoints (token only)."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.permissions import IsResearcher
from experiments.archiving import Refused, parse_archived
from experiments.models import Sweep
from qoelab_web.api import DetailSerializer, ErrorSerializer, errors_response
from qoelab_web.baseurl import BaseUrlMissing, site_base_url
from ratings import analysis, campaigns, flow, invitations, live, removal, throttle
from ratings.api.auth import EvaluatorTokenAuthentication, IsEvaluator
from ratings.api.serializers import (
    CampaignCreateSerializer,
    CampaignSerializer,
    InvitationSerializer,
    InviteSerializer,
    ScreenSerializer,
    SessionSerializer,
    SlotSerializer,
    SubmitReplySerializer,
    SubmitSerializer,
)
from ratings.choices import CampaignMode
from ratings.models import Campaign, Condition, Evaluator


def _campaign_error(exc: campaigns.CampaignError) -> Response:
    return errors_response(exc.errors)


@extend_schema(tags=["campaigns"])
@extend_schema_view(
    create=extend_schema(
        request=CampaignCreateSerializer, responses={201: CampaignSerializer, 400: ErrorSerializer}
    ),
    destroy=extend_schema(responses={204: None, 409: DetailSerializer}),
    list=extend_schema(
        parameters=[
            OpenApiParameter(
                "archived",
                str,
                enum=["false", "true", "all"],
                description="false (default): current only; true: archived only; all: both",
            )
        ]
    ),
)
class CampaignViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Rating campaigns you own (staff see all). Conditions come from a sweep or by hand."""

    queryset = Campaign.objects.none()
    serializer_class = CampaignSerializer
    permission_classes = [IsResearcher]

    def get_queryset(self) -> QuerySet:
        qs = campaigns.owned_campaigns(self.request.user)
        if self.action == "list":  # an archived campaign stays reachable by its id
            try:
                archived = parse_archived(self.request.query_params.get("archived"))
            except ValueError as exc:
                raise ValidationError({"archived": [str(exc)]}) from None
            qs = campaigns.listed_campaigns(self.request.user, archived)
        return qs.prefetch_related("conditions", "evaluators")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = CampaignCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = dict(body.validated_data)
        sweep = None
        if data.get("sweep") is not None:
            sweep = Sweep.objects.visible_to(request.user).filter(pk=data["sweep"]).first()
            if sweep is None:
                return errors_response([{"field": "sweep", "message": f"no sweep {data['sweep']} of yours"}])
        conditions = []
        artifacts = campaigns.usable_artifacts(request.user)
        for i, c in enumerate(data.get("conditions") or []):
            c = dict(c)
            for key in ("recording", "reference"):
                if c.get(key) is not None:
                    art = artifacts.filter(pk=c[key]).first()
                    if art is None:
                        return errors_response(
                            [
                                {
                                    "field": f"conditions[{i}].{key}",
                                    "message": f"no video artifact {c[key]} of yours",
                                }
                            ]
                        )
                    c[key] = art
            conditions.append(c)
        try:
            campaign = campaigns.create_campaign(
                request.user,
                name=data["name"],
                description=data.get("description", ""),
                mode=data["mode"],
                method=data["method"],
                aspects=[dict(a) for a in data["aspects"]] if data.get("aspects") else None,
                screens_per_condition=data.get("screens_per_condition"),
                sweep=sweep,
                conditions=conditions,
                add_gold=data["add_gold"],
                add_repeat=data["add_repeat"],
                training_best=data.get("training_best"),
                training_worst=data.get("training_worst"),
                screening=data.get("screening"),
            )
        except campaigns.CampaignError as exc:
            return _campaign_error(exc)
        return Response(CampaignSerializer(campaign).data, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Delete the campaign with its conditions, evaluators and ratings (409 while it is open)."""
        try:
            removal.delete_campaign(self.get_object())
        except Refused as exc:
            return Response({"detail": " ".join(exc.reasons)}, status=status.HTTP_409_CONFLICT)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={200: CampaignSerializer}, summary="Hide from the default list")
    @action(detail=True, methods=["post"])
    def archive(self, request: Request, pk: str | None = None) -> Response:
        return Response(CampaignSerializer(removal.set_archived(self.get_object(), True)).data)

    @extend_schema(request=None, responses={200: CampaignSerializer}, summary="Back into the default list")
    @action(detail=True, methods=["post"])
    def unarchive(self, request: Request, pk: str | None = None) -> Response:
        return Response(CampaignSerializer(removal.set_archived(self.get_object(), False)).data)

    @extend_schema(request=None, responses={200: CampaignSerializer, 400: ErrorSerializer})
    @action(detail=True, methods=["post"])
    def open(self, request: Request, pk: str | None = None) -> Response:
        """Open for evaluators; 400 lists every condition that lacks what the mode needs."""
        try:
            campaign = campaigns.open_campaign(self.get_object())
        except campaigns.CampaignError as exc:
            return _campaign_error(exc)
        return Response(CampaignSerializer(campaign).data)

    @extend_schema(request=None, responses={200: CampaignSerializer})
    @action(detail=True, methods=["post"])
    def close(self, request: Request, pk: str | None = None) -> Response:
        return Response(CampaignSerializer(campaigns.close_campaign(self.get_object())).data)

    @extend_schema(request=None, responses={200: CampaignSerializer, 400: ErrorSerializer})
    @action(detail=True, methods=["post"], url_path="refresh-recordings")
    def refresh_recordings(self, request: Request, pk: str | None = None) -> Response:
        """Attach recordings uploaded by the sweep's trials since the campaign was made (draft only)."""
        campaign = self.get_object()
        try:
            campaigns.attach_recordings(campaign)
        except campaigns.CampaignError as exc:
            return _campaign_error(exc)
        return Response(CampaignSerializer(campaign).data)

    @extend_schema(
        request=InviteSerializer,
        responses={201: InvitationSerializer(many=True), 400: ErrorSerializer, 503: DetailSerializer},
    )
    @action(detail=True, methods=["post"])
    def invite(self, request: Request, pk: str | None = None) -> Response:
        """New evaluators with one-time links; the tokens appear in this answer only.

        The links start with QOELAB_BASE_URL, never the request's Host; 503 when it is not set
        (and QOELAB_DEBUG is false), before any evaluator is created."""
        campaign = self.get_object()
        body = InviteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            base = site_base_url(request)
        except BaseUrlMissing as exc:
            return Response({"detail": exc.message}, status=status.HTTP_503_SERVICE_UNAVAILABLE)
        try:
            made = invitations.invite(
                campaign, labels=body.validated_data.get("labels"), count=body.validated_data.get("count")
            )
        except campaigns.CampaignError as exc:
            return _campaign_error(exc)
        out = [
            {
                "id": ev.pk,
                "label": ev.label,
                "token": raw,
                "url": base + reverse("ratings_rate:rate", args=[raw]),
            }
            for ev, raw in made
        ]
        return Response(out, status=status.HTTP_201_CREATED)

    @extend_schema(
        responses={
            200: OpenApiResponse(description="screening, DMOS ± CI, alpha, Table 4.2, P.910 subject model")
        }
    )
    @action(detail=True, methods=["get"])
    def results(self, request: Request, pk: str | None = None) -> Response:
        return Response(analysis.analyze(self.get_object()))

    @extend_schema(responses={200: OpenApiResponse(description="progress per condition and evaluator")})
    @action(detail=True, methods=["get"])
    def progress(self, request: Request, pk: str | None = None) -> Response:
        return Response(analysis.progress(self.get_object()))

    @extend_schema(responses={(200, "text/csv"): OpenApiResponse(description="raw ratings")})
    @action(detail=True, methods=["get"], url_path="ratings.csv")
    def ratings_csv(self, request: Request, pk: str | None = None) -> StreamingHttpResponse:
        campaign = self.get_object()
        response = StreamingHttpResponse(
            analysis.ratings_csv(campaign), content_type="text/csv; charset=utf-8"
        )
        response["Content-Disposition"] = f'attachment; filename="campaign-{campaign.pk}-ratings.csv"'
        return response


# ---------------------------------------------------------------------------------------------
# Evaluator endpoints


class EvaluatorAPIView(APIView):
    authentication_classes = [EvaluatorTokenAuthentication]
    permission_classes = [IsEvaluator]

    def evaluator(self, request: Request) -> Evaluator:
        ev = request.auth
        ev.refresh_from_db()
        return ev

    @staticmethod
    def flow_error(exc: flow.FlowError) -> Response:
        return Response({"detail": exc.message}, status=exc.status)

    @staticmethod
    def throttled(ev: Evaluator, bucket: str) -> Response | None:
        ok, wait = throttle.allow(ev.pk, bucket)
        if ok:
            return None
        return Response(
            {"detail": f"Too many requests; please wait {wait} s."},
            status=status.HTTP_429_TOO_MANY_REQUESTS,
            headers={"Retry-After": str(wait)},
        )


@extend_schema(tags=["evaluator"])
class StateView(EvaluatorAPIView):
    @extend_schema(responses={200: OpenApiResponse(description="where the evaluator is and what to show")})
    def get(self, request: Request) -> Response:
        return Response(flow.evaluator_state(self.evaluator(request)))


@extend_schema(tags=["evaluator"])
class ConsentView(EvaluatorAPIView):
    @extend_schema(request=None, responses={200: OpenApiResponse(description="state"), 409: DetailSerializer})
    def post(self, request: Request) -> Response:
        try:
            ev = flow.give_consent(self.evaluator(request))
        except flow.FlowError as exc:
            return self.flow_error(exc)
        return Response(flow.evaluator_state(ev))


@extend_schema(tags=["evaluator"])
class ScreenView(EvaluatorAPIView):
    @extend_schema(
        request=ScreenSerializer,
        responses={
            200: OpenApiResponse(description="form state"),
            409: DetailSerializer,
            429: DetailSerializer,
        },
    )
    def post(self, request: Request) -> Response:
        ev = self.evaluator(request)
        if (limited := self.throttled(ev, "screens")) is not None:
            return limited
        body = ScreenSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        d = body.validated_data
        try:
            state = flow.record_screen(
                ev, d["condition"], d["stage"], d["index"], d.get("client_t"), d.get("played_s")
            )
        except flow.FlowError as exc:
            return self.flow_error(exc)
        return Response(state)


@extend_schema(tags=["evaluator"])
class SubmitView(EvaluatorAPIView):
    @extend_schema(
        request=SubmitSerializer,
        responses={
            200: SubmitReplySerializer,
            201: SubmitReplySerializer,
            409: DetailSerializer,
            429: DetailSerializer,
        },
    )
    def post(self, request: Request) -> Response:
        """One answer per aspect for the current condition; repeating it stores nothing (changed false)."""
        ev = self.evaluator(request)
        if (limited := self.throttled(ev, "submit")) is not None:
            return limited
        body = SubmitSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            res = flow.submit_ratings(ev, body.validated_data["condition"], body.validated_data["scores"])
        except flow.FlowError as exc:
            return self.flow_error(exc)
        ev = res.evaluator
        data = {
            "changed": res.changed,
            "detail": res.detail,
            "position": ev.position,
            "total": ev.total,
            "finished": ev.finished_at is not None,
        }
        return Response(data, status=status.HTTP_201_CREATED if res.changed else status.HTTP_200_OK)


@extend_schema(tags=["evaluator"])
class SlotView(EvaluatorAPIView):
    """Live mode: reserve (POST) or poll (GET) the lab slot for the current condition; DELETE frees it."""

    def _check(self, ev: Evaluator) -> Condition:
        if ev.campaign.mode != CampaignMode.LIVE:
            raise flow.FlowError("This campaign is in recorded mode; there are no live slots.", 409)
        cid = ev.current_condition_id() if ev.consent_at else None
        if cid is None:
            raise flow.FlowError("There is no current condition to reserve a slot for.", 409)
        return flow._current(ev, cid)

    @extend_schema(responses={200: SlotSerializer, 409: DetailSerializer})
    def get(self, request: Request) -> Response:
        ev = self.evaluator(request)
        slot = live.open_slot(ev)
        if slot is not None:
            live.renew(slot)
            live.promote()
            slot.refresh_from_db()
        return Response(live.slot_json(slot))

    @extend_schema(request=None, responses={200: SlotSerializer, 409: DetailSerializer})
    def post(self, request: Request) -> Response:
        ev = self.evaluator(request)
        try:
            cond = self._check(ev)
        except flow.FlowError as exc:
            return self.flow_error(exc)
        return Response(live.slot_json(live.reserve(ev, cond)))

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request) -> Response:
        live.release_for(self.evaluator(request), "released by the evaluator")
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(tags=["evaluator"])
class SessionView(EvaluatorAPIView):
    """Live mode hook: the websocket URL of the evaluator's active remote session (for noVNC/spice-html5)."""

    @extend_schema(responses={200: SessionSerializer, 409: SessionSerializer, 503: SessionSerializer})
    def get(self, request: Request) -> Response:
        ev = self.evaluator(request)
        if not live.available():
            return Response({"available": False, "detail": live.EVALUATOR_UNAVAILABLE}, status=503)
        slot = live.open_slot(ev)
        if slot is None or slot.state != "active":
            detail = (
                "Your session has not started yet; you are in the queue." if slot else "Reserve a slot first."
            )
            return Response({"available": True, "detail": detail}, status=409)
        session = dict(slot.session or {})
        if session.get("error"):
            return Response({"available": True, "detail": session["error"]}, status=503)
        return Response({"available": True, **session})
