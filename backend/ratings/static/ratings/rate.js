/* Evaluator page: plays the reference and the degraded video with no way to skip ahead, reports
 * each seen stage to the server, and enables the rating form once the server says it may be
 * answered. Live mode: reserves a slot, shows the queue position, and hands the session to the
 * remote-desktop client through the `qoelab:live-session` event (see docs/ratings.md).
 *
 * Plain script, no dependencies. The server enforces every rule again; this only keeps the page
 * in step with it.
 */
(function () {
  "use strict";

  const app = document.getElementById("rate-app");
  if (!app) return;
  const token = app.dataset.token;
  const api = app.dataset.api;
  const conditionId = Number(app.dataset.condition);
  const required = Number(app.dataset.required);

  function call(method, path, body) {
    return fetch(api + path, {
      method,
      headers: { Authorization: "Evaluator " + token, "Content-Type": "application/json" },
      body: body ? JSON.stringify(body) : undefined,
      credentials: "omit", // the token is the credential here, not the cookie
    }).then((r) => r.json().catch(() => ({})).then((data) => ({ status: r.status, data })));
  }

  function showError(text) {
    let box = document.querySelector(".rate-error[data-role='js']");
    if (!box) {
      box = document.createElement("p");
      box.className = "rate-error";
      box.setAttribute("role", "alert");
      box.dataset.role = "js";
      app.prepend(box);
    }
    box.textContent = text;
  }

  function applyState(state) {
    if (!state || state.required == null) return;
    // The server says when a stage is done (ACR shows no reference: done from the start).
    const refDone = Boolean(state.reference_done);
    const degDone = Boolean(state.degraded_done);
    document.querySelectorAll("[data-seen='reference']").forEach((el) => {
      el.textContent = app.dataset.mode === "recorded" ? (refDone ? "Watched ✓" : "") : String(state.reference_seen);
    });
    document.querySelectorAll("[data-seen='degraded']").forEach((el) => {
      el.textContent = app.dataset.mode === "recorded" ? (degDone ? "Watched ✓" : "") : String(state.degraded_seen);
    });
    const playDeg = document.querySelector("[data-play='degraded']");
    if (playDeg && refDone && !(state.problems || []).length) playDeg.disabled = false;
    const fields = document.getElementById("rating-fields");
    if (fields) fields.disabled = !state.enabled;
    const lock = document.getElementById("form-lock");
    if (lock) {
      // Both videos ended in the page but the server did not hand out all their bytes: say why.
      const undelivered = refDone && degDone && state.delivery_problem;
      lock.textContent = state.enabled ? "You can answer now." : undelivered || lock.textContent;
    }
    app.dataset.enabled = state.enabled ? "true" : "false";
    if (state.enabled) {
      const first = document.querySelector("#rating-fields input[type=radio]");
      if (first && document.activeElement && document.activeElement.dataset.play) first.focus();
    }
  }

  function reportScreen(stage, index, playedS) {
    const body = { condition: conditionId, stage, index, client_t: performance.now() };
    if (playedS != null) body.played_s = Math.round(playedS * 1000) / 1000;
    return call("POST", "screens/", body).then(
      (res) => {
        if (res.status === 200) applyState(res.data);
        else showError(res.data.detail || "Could not save your progress (HTTP " + res.status + "). Please reload.");
        return res;
      },
    );
  }

  // ---- recorded mode: videos without controls; only `ended` counts as seen ----
  document.querySelectorAll("[data-play]").forEach((button) => {
    const stage = button.dataset.play;
    const video = document.getElementById("video-" + stage);
    if (!video) return;
    let furthest = 0;
    // Seconds of video played since the button was pressed (replays of a part add to it): the
    // playback screening rule holds an evaluator's total against the clips' length.
    let played = 0;
    let last = 0;
    video.controls = false;
    video.addEventListener("timeupdate", () => {
      if (!video.seeking && video.currentTime > furthest) furthest = video.currentTime;
      if (video.currentTime > last) played += video.currentTime - last;
      last = video.currentTime;
    });
    // No skipping ahead, even through keyboard shortcuts or the context menu.
    video.addEventListener("seeking", () => {
      if (video.currentTime > furthest + 0.25) video.currentTime = furthest;
    });
    video.addEventListener("ended", () => {
      button.disabled = false;
      button.textContent = stage === "reference" ? "Play the reference again" : "Play the case again";
      if (video.currentTime > last) played += video.currentTime - last;
      reportScreen(stage, 0, played);
    });
    video.addEventListener("error", () => {
      showError("The video could not be played. Please reload the page; if it persists, tell the researcher.");
      button.disabled = false;
    });
    button.addEventListener("click", () => {
      furthest = 0;
      played = 0;
      last = 0;
      video.currentTime = 0;
      button.disabled = true;
      // Both videos share one place on the page (rate.css shows the one named here); bring it into view.
      app.dataset.showing = stage;
      const stageBox = video.closest(".stage");
      if (stageBox) stageBox.scrollIntoView({ block: "nearest" });
      const playing = video.play();
      if (playing && playing.catch) {
        playing.catch((e) => {
          button.disabled = false;
          showError("The video could not start (" + e.message + "). Please press the button again.");
        });
      }
    });
  });

  // ---- live mode: slot queue, then the session hook ----
  // Narrower than a stimulus, rate.css shows this notice instead of the videos or the remote desktop.
  const notice = document.querySelector(".narrow-notice");
  const tooNarrow = () => !!notice && getComputedStyle(notice).display !== "none";

  const liveBox = document.getElementById("live-session");
  function startLive() {
    const queue = liveBox.querySelector("[data-role='queue']");
    let started = false;
    const poll = (method) =>
      call(method, "slot/").then((res) => {
        if (res.status !== 200) {
          queue.textContent = res.data.detail || "The live session is not available.";
          return;
        }
        const slot = res.data;
        if (slot.state === "waiting") {
          queue.textContent = "Waiting for a free place: you are number " + slot.queue_position + " in the queue.";
        } else if (slot.state === "active" && !started) {
          started = true;
          queue.textContent = "Your session is starting…";
          // The provider may answer before the lab worker has the desktop up: poll until the
          // session has its WebSocket URL (or an error).
          const getSession = () =>
            call("GET", "session/").then((s) => {
              if (s.status === 200 && !s.data.websocket_url && !s.data.error) {
                queue.textContent = "Your remote desktop is starting on the lab computer…";
                setTimeout(getSession, 1500);
                return;
              }
              if (s.status !== 200) {
                queue.textContent = s.data.detail || "The live session is not available.";
                return;
              }
              queue.textContent = "Your session is ready.";
              // The remote-desktop client (noVNC, spice-html5, X2Go view) listens for this event.
              liveBox.dispatchEvent(new CustomEvent("qoelab:live-session", { detail: s.data, bubbles: true }));
            });
          getSession();
        } else if (slot.state === "none") {
          poll("POST");
        }
      });
    poll("POST");
    setInterval(() => poll("GET"), 3000);
  }
  if (app.dataset.mode === "live" && liveBox && app.dataset.liveAvailable === "true") {
    if (!tooNarrow()) {
      startLive();
    } else {
      // Take no place in the queue for a remote desktop that cannot be shown; start once it can.
      const onResize = () => {
        if (tooNarrow()) return;
        window.removeEventListener("resize", onResize);
        startLive();
      };
      window.addEventListener("resize", onResize);
    }
  }

  // Hooks for the live client and for tests.
  window.qoelabRate = { reportScreen, applyState, conditionId, required };
})();
