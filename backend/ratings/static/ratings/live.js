/* Live mode of the evaluator page: the reference (the workload pages at 800×600, no remote desktop)
 * in a same-origin frame, then the remote desktop itself through noVNC (VNC) or spice-html5 (SPICE),
 * connected to the WebSocket proxy the lab worker runs on the client side of the emulated link.
 *
 * Screens: a reference screen is each page the frame loads after the first; a remote-desktop screen is
 * each page the remote kiosk browser loads after the first, as the worker reports it (session.pages_seen),
 * so clicking beside the link does not count. Both go through window.qoelabRate.reportScreen, and the
 * server enables the form after the required screens of both stages (docs/ratings.md).
 *
 * X2Go (client kind "x2go-view") has no browser client: the worker runs the native X2Go client and
 * noVNC shows that client's screen through a local view that does not cross the emulated link. The
 * page says so (session.local_view, session.note) before and while the evaluator uses it.
 */
const app = document.getElementById("rate-app");
const box = document.getElementById("live-session");

function call(method, path) {
  return fetch(app.dataset.api + path, {
    method,
    headers: { Authorization: "Evaluator " + app.dataset.token },
    credentials: "omit",
  }).then((r) => r.json().catch(() => ({})).then((data) => ({ status: r.status, data })));
}

if (app && box && app.dataset.mode === "live" && app.dataset.liveAvailable === "true") {
  const required = Number(app.dataset.required);
  const rate = () => window.qoelabRate;
  let refSeen = Number(app.dataset.referenceSeen);
  let degSeen = Number(app.dataset.degradedSeen);
  const status = box.querySelector("[data-role='client-status']");
  const refStatus = box.querySelector("[data-role='reference-status']");
  const frame = box.querySelector("iframe[data-role='reference']");
  const clientBox = box.querySelector("[data-role='client']");
  let session = null;
  let connected = false;

  // ---- reference: pages loaded by the frame after the first one ----
  let loads = 0;
  // ACR (data-reference="none"): no reference stage, the remote desktop comes first.
  const refDone = () => app.dataset.reference === "none" || refSeen >= required;
  function updateRef() {
    // Done: the reference's 800×600 frame folds away (rate.css), so the remote desktop takes its
    // place instead of sitting a screen's height further down.
    box.dataset.referenceDone = String(refDone());
    if (!refStatus) return;
    refStatus.textContent = refDone()
      ? "Reference done ✓ Now use the remote desktop below."
      : "Click the pink NEXT button on each page. Pages done: " + refSeen + " of " + required + ".";
  }
  if (frame) {
    frame.addEventListener("load", () => {
      loads += 1;
      const index = loads - 2; // the first load is the starting page, not a screen gone through
      if (index >= 0 && index < required && !refDone()) {
        rate()
          .reportScreen("reference", index)
          .then((res) => {
            if (res.status === 200) {
              refSeen = res.data.reference_seen;
              updateRef();
              maybeConnect();
            }
          });
      }
    });
    frame.src = frame.dataset.src;
  }
  updateRef();

  // ---- the remote desktop ----
  function setStatus(text) {
    status.textContent = text;
  }

  function showLocalView(info) {
    const notice = box.querySelector("[data-role='local-view']");
    if (!notice || !info.local_view) return;
    notice.textContent = info.note || "You are seeing the remote desktop client's screen through a local view.";
    notice.hidden = false;
    box.dataset.localView = "true";
  }

  async function connectNoVNC(info) {
    const { default: RFB } = await import(box.dataset.novnc);
    const rfb = new RFB(clientBox, info.websocket_url, {
      credentials: { password: info.password || "" },
      wsProtocols: ["binary"],
    });
    rfb.scaleViewport = false; // 1:1, like the reference: scaling would change image clarity
    rfb.resizeSession = false;
    rfb.focusOnClick = true;
    rfb.addEventListener("connect", () => {
      connected = true;
      box.dataset.connected = "true";
      setStatus(
        info.local_view
          ? "Connected to the remote desktop (X2Go, through a local view). Click the pink NEXT button on each page."
          : "Connected to the remote desktop (VNC, noVNC). Click the pink NEXT button on each page.",
      );
    });
    rfb.addEventListener("disconnect", (e) => {
      box.dataset.connected = "false";
      setStatus(
        e.detail.clean
          ? "The remote desktop session has ended."
          : "The connection to the remote desktop was lost. Please reload the page.",
      );
    });
    return rfb;
  }

  // spice-html5 0.3.0 reads display.streams[id] when a JPEG draw finishes, but creates `streams` only
  // with the first video stream: every JPEG drawn before that throws a TypeError (the picture is already
  // drawn). Giving each display channel its `streams` up front avoids the error; same module instance
  // as main.js's own import (same URL).
  async function guardSpiceStreams() {
    const url = new URL("display.js", new URL(box.dataset.spice, window.location.href)).href;
    const { SpiceDisplayConn } = await import(url);
    const proto = SpiceDisplayConn && SpiceDisplayConn.prototype;
    if (!proto || proto.qoelabStreamsGuard) return;
    const original = proto.process_channel_message;
    proto.process_channel_message = function (msg) {
      if (!this.streams) this.streams = [];
      return original.call(this, msg);
    };
    proto.qoelabStreamsGuard = true;
  }

  async function connectSpice(info) {
    let Spice;
    try {
      Spice = await import(box.dataset.spice);
      await guardSpiceStreams();
    } catch (err) {
      setStatus("The SPICE client (spice-html5) is not installed on this server; please tell the researcher.");
      return null;
    }
    const screen = document.createElement("div");
    screen.id = "spice-screen";
    clientBox.appendChild(screen);
    const messages = document.createElement("div");
    messages.id = "spice-messages";
    messages.hidden = true;
    clientBox.appendChild(messages);
    const conn = new Spice.SpiceMainConn({
      uri: info.websocket_url,
      screen_id: "spice-screen",
      message_id: "spice-messages",
      password: info.password || "",
      onerror: (e) => setStatus("The connection to the remote desktop failed: " + (e.message || e) + "."),
      onsuccess: () => {
        connected = true;
        box.dataset.connected = "true";
        setStatus("Connected to the remote desktop (SPICE, spice-html5). Click the pink NEXT button on each page.");
      },
    });
    return conn;
  }

  let connecting = false;
  function maybeConnect() {
    if (connecting || !session || !refDone()) {
      if (session && !refDone()) setStatus("Your remote desktop is ready. Finish the reference first.");
      return;
    }
    connecting = true;
    box.dataset.client = session.client;
    // Its turn: bring the remote desktop into view (it was below the fold, issue 33).
    clientBox.scrollIntoView({ block: "start" });
    if (session.note) box.querySelector("[data-role='note']").textContent = session.note;
    setStatus("Connecting to the remote desktop…");
    // x2go-view: noVNC on the X2Go client's display (a local view).
    const clients = { novnc: connectNoVNC, "x2go-view": connectNoVNC, "spice-html5": connectSpice };
    const start = clients[session.client] || null;
    if (!start) {
      setStatus(session.detail || "This protocol cannot be shown in the browser.");
      return;
    }
    start(session).catch((err) => setStatus("The remote desktop client could not start: " + err.message));
    setInterval(pollScreens, 1500);
  }

  function pollScreens() {
    if (!connected) return;
    call("GET", "session/").then((res) => {
      if (res.status !== 200) return;
      const seen = Math.min(Number(res.data.pages_seen || 0), required);
      for (let i = degSeen; i < seen; i += 1) {
        rate()
          .reportScreen("degraded", i)
          .then((r) => {
            if (r.status === 200) {
              degSeen = Math.max(degSeen, r.data.degraded_seen);
              box.querySelector("[data-role='degraded-count']").textContent = String(degSeen);
            }
          });
      }
      degSeen = Math.max(degSeen, seen);
    });
  }

  box.addEventListener("qoelab:live-session", (e) => {
    session = e.detail;
    if (session.error) {
      setStatus(session.error);
      return;
    }
    showLocalView(session);
    maybeConnect();
  });
}
