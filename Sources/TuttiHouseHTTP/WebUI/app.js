// Tutti's web UI: the house as /api/events shows it, driven through /api (docs/HTTP-API.md).
// No build step and nothing from outside the house: plain modules, as the browser runs them.

const $ = (id) => document.getElementById(id);
const palette = ["#4fb3ff", "#ffb454", "#6bd18a", "#ff6b9a", "#b18cff", "#5ce1e6", "#f5e663", "#ff8a5c"];
const plotSeconds = 60;

const state = {
  status: null,
  queue: null,
  // performance.now() when the last status arrived: the playhead moves on from there.
  statusAt: 0,
  // Per room, the samples of the last minute: {t (ms, performance.now()), buffer (s), sync (µs)}.
  history: new Map(),
};

async function api(method, path, body) {
  const response = await fetch("/api" + path, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const reply = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(reply.error ?? `${method} ${path}: HTTP ${response.status}`);
  return reply;
}

/// Runs a command; a refusal is shown for a few seconds, never thrown into the console.
async function command(method, path, body) {
  try {
    return await api(method, path, body);
  } catch (error) {
    showMessage(error.message);
    return null;
  }
}

let messageTimer = 0;
function showMessage(text) {
  const box = $("message");
  box.textContent = text;
  box.hidden = false;
  clearTimeout(messageTimer);
  messageTimer = setTimeout(() => { box.hidden = true; }, 5000);
}

function clock(seconds) {
  if (!Number.isFinite(seconds) || seconds < 0) seconds = 0;
  const whole = Math.floor(seconds);
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, "0")}`;
}

function basename(path) {
  return path.split("/").filter(Boolean).pop() ?? path;
}

// MARK: The feed

function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const feed = new WebSocket(`${scheme}://${location.host}/api/events`);
  const indicator = $("connection");
  feed.onopen = () => { indicator.dataset.state = "open"; indicator.textContent = "live"; };
  feed.onmessage = (event) => {
    const message = JSON.parse(event.data);
    // Each group's status and queue come tagged with its name, after the groups; this page
    // shows the default group's.
    if (message.event === "groups") state.defaultGroup = message.groups.groups.find((group) => group.isDefault)?.name;
    else if (message.event === "status" && message.group === state.defaultGroup) receiveStatus(message.status);
    else if (message.event === "queue" && message.group === state.defaultGroup) { state.queue = message.queue; renderQueue(); }
  };
  feed.onclose = () => {
    indicator.dataset.state = "closed";
    indicator.textContent = "reconnecting…";
    setTimeout(connect, 1000);
  };
}

function receiveStatus(status) {
  state.status = status;
  state.statusAt = performance.now();
  const now = performance.now();
  for (const room of status.rooms) {
    if (!state.history.has(room.name)) state.history.set(room.name, []);
    const samples = state.history.get(room.name);
    samples.push({ t: now, buffer: room.bufferSeconds ?? null, sync: room.syncErrorMicroseconds ?? null });
    while (samples.length && samples[0].t < now - plotSeconds * 1000) samples.shift();
  }
  renderStatus();
  renderRooms();
  renderLibrarySize();
}

// MARK: Now playing

function renderStatus() {
  const status = state.status;
  const playing = status.state === "playing";
  // The display title is "Artist – Title"; the artist has its own line.
  const title = status.title && status.artist && status.title.startsWith(status.artist + " – ")
    ? status.title.slice(status.artist.length + 3) : status.title;
  $("title").textContent = title ? basename(title) : "Nothing playing";
  $("artist-album").textContent = [status.artist, status.album].filter(Boolean).join(" · ");
  showArtwork(status.path);
  $("state").textContent = status.state;
  const button = $("play-pause");
  const pausable = playing || status.state === "starting";
  button.querySelector("path").setAttribute("d", pausable ? "M6 4h4v16H6zM14 4h4v16h-4z" : "M7 4v16l13-8z");
  button.setAttribute("aria-label", pausable ? "Pause" : "Play");
  const seek = $("seek");
  seek.disabled = status.itemDurationSeconds === undefined;
  if (status.itemDurationSeconds !== undefined) seek.max = status.itemDurationSeconds;
  $("duration").textContent = clock(status.itemDurationSeconds);
  tickPosition();
}

/// The item's cover art, or the note when it has none (the house answers a placeholder rather
/// than a 404) or is a stream.
function showArtwork(path) {
  const image = $("art");
  const source = path && path.startsWith("/") ? artworkURL(path) : "";
  if (image.dataset.path === (path ?? "")) return;
  image.dataset.path = path ?? "";
  image.hidden = !source;
  if (source) image.src = source; else image.removeAttribute("src");
}

function artworkURL(path) {
  return `/api/artwork?placeholder=true&path=${encodeURIComponent(path)}`;
}

let seeking = false;
function tickPosition() {
  const status = state.status;
  if (!status || status.itemPositionSeconds === undefined) {
    $("position").textContent = clock(0);
    if (!seeking) $("seek").value = 0;
    return;
  }
  const elapsed = status.state === "playing" ? (performance.now() - state.statusAt) / 1000 : 0;
  const position = Math.min(status.itemPositionSeconds + elapsed, status.itemDurationSeconds ?? Infinity);
  $("position").textContent = clock(position);
  if (!seeking) $("seek").value = position;
}

$("seek").addEventListener("input", () => { seeking = true; $("position").textContent = clock(Number($("seek").value)); });
$("seek").addEventListener("change", async () => {
  await command("POST", "/transport/seek", { seconds: Number($("seek").value) });
  seeking = false;
});

$("play-pause").addEventListener("click", () => {
  const status = state.status;
  if (!status) return;
  if (status.state === "playing") return command("POST", "/transport/pause");
  if (status.state === "paused") return command("POST", "/transport/resume");
  const files = (state.queue?.items ?? []).map((item) => item.path);
  if (files.length === 0) return showMessage("The queue is empty: add a file or a URL first.");
  return command("POST", "/transport/play", { files });
});
$("next").addEventListener("click", () => command("POST", "/transport/next"));
$("previous").addEventListener("click", () => command("POST", "/transport/previous"));

// MARK: Rooms

const roomViews = new Map();

/// A volume slider that sends its value while it moves (at most every 100 ms) and at once
/// where it stops.
function sendsVolume(slider, output, send) {
  let pending = 0;
  slider.addEventListener("input", () => {
    output.textContent = slider.value;
    clearTimeout(pending);
    pending = setTimeout(send, 100);
  });
  slider.addEventListener("change", () => { clearTimeout(pending); send(); });
}

sendsVolume($("group-volume"), $("group-volume-value"), () => command("PUT", "/group/volume", { percent: Number($("group-volume").value) }));

function makeRoomView(name) {
  const item = document.createElement("li");
  item.className = "room";
  item.dataset.room = name;
  item.innerHTML = `
    <label><input type="checkbox" class="in-group"> <span class="name"></span> <span class="subtle state"></span></label>
    <div class="volume"><input type="range" class="volume-slider" min="0" max="100" step="1"><output></output></div>
    <div class="health"></div>
    <div class="room-settings">
      <label>latency <input type="number" class="latency" min="0" max="2000" step="1" inputmode="decimal"> ms</label>
      <button type="button" class="rename">Rename</button>
    </div>
    <div class="problem"></div>`;
  item.querySelector(".name").textContent = name;
  const latency = item.querySelector(".latency");
  latency.setAttribute("aria-label", `${name} latency in milliseconds`);
  latency.addEventListener("change", () => {
    // Emptied while typing: nothing to send yet.
    if (latency.value === "") return;
    const milliseconds = Number(latency.value);
    if (milliseconds >= 0 && milliseconds <= 2000) {
      command("PUT", `/rooms/${encodeURIComponent(name)}/latency`, { milliseconds });
    } else {
      showMessage("A latency is 0 to 2000 ms.");
    }
  });
  item.querySelector(".rename").addEventListener("click", () => startRename(item, name));
  const box = item.querySelector(".in-group");
  box.setAttribute("aria-label", `${name} in the group`);
  box.addEventListener("change", () => command("POST", `/rooms/${encodeURIComponent(name)}/${box.checked ? "join" : "leave"}`));
  const slider = item.querySelector(".volume-slider");
  slider.setAttribute("aria-label", `${name} volume`);
  sendsVolume(slider, item.querySelector("output"), () => command("PUT", `/rooms/${encodeURIComponent(name)}/volume`, { percent: Number(slider.value) }));
  return item;
}

/// The room's name becomes a text box: Enter renames, Escape or leaving it cancels.
function startRename(item, name) {
  const label = item.querySelector(".name");
  const box = Object.assign(document.createElement("input"), { type: "text", value: name, className: "rename-box", maxLength: 64 });
  box.setAttribute("aria-label", `New name for ${name}`);
  label.replaceWith(box);
  box.focus();
  box.select();
  let done = false;
  const finish = async (rename) => {
    if (done) return;
    done = true;
    const to = box.value.trim();
    box.replaceWith(label);
    if (rename && to && to !== name) await command("POST", `/rooms/${encodeURIComponent(name)}/rename`, { to });
  };
  box.addEventListener("keydown", (event) => {
    if (event.key === "Enter") finish(true);
    if (event.key === "Escape") finish(false);
  });
  box.addEventListener("blur", () => finish(false));
}

function renderRooms() {
  const rooms = state.status.rooms;
  const list = $("rooms");
  $("no-rooms").hidden = rooms.length > 0;
  const group = $("group-volume");
  $("group").hidden = state.status.groupVolume === undefined;
  if (state.status.groupVolume !== undefined && document.activeElement !== group) {
    group.value = state.status.groupVolume;
    $("group-volume-value").textContent = state.status.groupVolume;
  }
  for (const [name, view] of roomViews) {
    if (!rooms.some((room) => room.name === name)) { view.remove(); roomViews.delete(name); }
  }
  rooms.forEach((room, index) => {
    let view = roomViews.get(room.name);
    if (!view) { view = makeRoomView(room.name); roomViews.set(room.name, view); }
    if (list.children[index] !== view) list.insertBefore(view, list.children[index] ?? null);
    view.querySelector(".in-group").checked = room.group === state.status.group;
    view.querySelector(".state").textContent = room.state;
    const slider = view.querySelector(".volume-slider");
    // Not under the user's finger.
    if (document.activeElement !== slider) {
      slider.value = room.volume;
      view.querySelector("output").textContent = room.volume;
    }
    const health = [];
    if (room.bufferSeconds !== undefined) health.push(`buffer ${room.bufferSeconds.toFixed(1)} s`);
    if (room.syncErrorMicroseconds !== undefined) health.push(`sync ${room.syncErrorMicroseconds.toFixed(0)} µs`);
    health.push(room.clockErrorMicroseconds !== undefined ? `clock ±${room.clockErrorMicroseconds.toFixed(0)} µs` : "clock not settled");
    if (room.underruns) health.push(`${room.underruns} underrun${room.underruns === 1 ? "" : "s"}`);
    const latency = view.querySelector(".latency");
    if (document.activeElement !== latency) latency.value = room.latencyMs ?? 0;
    view.querySelector(".health").textContent = health.join(" · ");
    view.querySelector(".problem").textContent = room.problem ?? "";
  });
  renderLegend();
}

// MARK: Queue

function renderQueue() {
  const list = $("queue");
  list.replaceChildren();
  for (const item of state.queue.items) {
    const row = document.createElement("li");
    row.dataset.index = item.index;
    row.dataset.path = item.path;
    if (item.current) row.classList.add("current");
    row.innerHTML = `<span class="handle" title="Drag to reorder">☰</span><span class="name"></span><span class="length"></span>
      <button type="button" class="remove" aria-label="Remove">✕</button>`;
    row.querySelector(".name").textContent = item.title ? basename(item.title) : basename(item.path);
    row.querySelector(".name").title = item.path;
    row.querySelector(".length").textContent = item.durationSeconds === undefined ? "" : clock(item.durationSeconds);
    row.querySelector(".remove").addEventListener("click", () => command("DELETE", `/queue/${item.index}`));
    row.querySelector(".handle").addEventListener("pointerdown", (event) => startDrag(event, row));
    list.append(row);
  }
}

/// Reorders by pointer (mouse, touch or pen alike): the row follows the pointer among its
/// siblings, and where it is let go the house moves the item. The listeners are on the window,
/// not captured by the handle: moving the row in the list takes it out of the document for an
/// instant, which would end a capture.
function startDrag(event, row) {
  event.preventDefault();
  const list = $("queue");
  const from = Number(row.dataset.index);
  row.classList.add("dragging");
  const move = (moveEvent) => {
    const siblings = [...list.children].filter((other) => other !== row);
    const before = siblings.find((other) => {
      const box = other.getBoundingClientRect();
      return moveEvent.clientY < box.top + box.height / 2;
    });
    if (row.nextElementSibling !== (before ?? null)) list.insertBefore(row, before ?? null);
  };
  const end = () => {
    window.removeEventListener("pointermove", move);
    window.removeEventListener("pointerup", end);
    window.removeEventListener("pointercancel", end);
    row.classList.remove("dragging");
    const to = [...list.children].indexOf(row);
    if (to !== from) command("POST", "/queue/move", { from, to });
    else renderQueue();
  };
  window.addEventListener("pointermove", move);
  window.addEventListener("pointerup", end);
  window.addEventListener("pointercancel", end);
}

// MARK: Adding

$("add-form").addEventListener("submit", (event) => {
  event.preventDefault();
  add("play-now");
});
for (const button of document.querySelectorAll('#add-form button[type="button"]')) {
  button.addEventListener("click", () => add(button.dataset.action));
}

async function add(action) {
  const input = $("add-input");
  const file = input.value.trim();
  if (!file) return showMessage("Type a file on the house or an http(s) URL.");
  if (await enqueue(action, file)) input.value = "";
}

// MARK: Library

$("search-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const query = $("search-input").value.trim();
  if (!query) return browse();
  const reply = await command("GET", `/library/search?query=${encodeURIComponent(query)}&limit=100`);
  if (reply) showLibrary(reply, [{ label: `“${query}”` }]);
});
$("browse").addEventListener("click", () => browse());

async function browse(artist, album) {
  const parameters = new URLSearchParams();
  if (artist !== undefined) parameters.set("artist", artist);
  if (album !== undefined) parameters.set("album", album);
  const reply = await command("GET", `/library/browse?${parameters}`);
  if (!reply) return;
  const path = [{ label: "Artists", go: () => browse() }];
  if (artist !== undefined) path.push({ label: artist || "(no artist)", go: () => browse(artist) });
  if (album !== undefined) path.push({ label: album || "(no album)" });
  showLibrary(reply, path, artist);
}

function showLibrary(reply, path, artist) {
  const trail = $("library-path");
  trail.replaceChildren(...path.flatMap((step, index) => {
    const part = step.go ? Object.assign(document.createElement("a"), { textContent: step.label, onclick: step.go })
                         : Object.assign(document.createElement("span"), { textContent: step.label });
    return index === 0 ? [part] : [document.createTextNode(" › "), part];
  }));
  const list = $("library-results");
  list.replaceChildren();
  // An album's tracks open with its cover.
  const first = (reply.tracks ?? [])[0];
  if (first && path.length === 3) {
    const cover = Object.assign(document.createElement("img"), { className: "album-art", alt: "", src: artworkURL(first.path) });
    list.append(Object.assign(document.createElement("li"), { className: "album-cover" }));
    list.lastChild.append(cover);
  }
  for (const name of reply.artists ?? []) list.append(link(name || "(no artist)", () => browse(name)));
  for (const name of reply.albums ?? []) list.append(link(name || "(no album)", () => browse(artist, name)));
  for (const track of reply.tracks ?? []) {
    const row = document.createElement("li");
    row.className = "track";
    row.dataset.path = track.path;
    row.innerHTML = `<span class="name"></span>
      <button type="button" data-action="play-now">Play now</button>
      <button type="button" data-action="play-next">Play next</button>
      <button type="button" data-action="add">Add</button>`;
    const name = row.querySelector(".name");
    name.textContent = track.title ?? basename(track.path);
    const detail = document.createElement("small");
    detail.textContent = ` ${track.artist ?? ""}${track.album ? " · " + track.album : ""}${track.durationSeconds === undefined ? "" : " · " + clock(track.durationSeconds)}`;
    name.append(detail);
    for (const button of row.querySelectorAll("button")) {
      button.addEventListener("click", () => enqueue(button.dataset.action, track.path));
    }
    list.append(row);
  }
  if (list.children.length === 0) list.append(Object.assign(document.createElement("li"), { textContent: "Nothing found.", className: "subtle" }));
}

function link(label, go) {
  const row = document.createElement("li");
  row.append(Object.assign(document.createElement("a"), { textContent: label, onclick: go }));
  return row;
}

async function enqueue(action, file) {
  if (action === "play-now") return command("POST", "/transport/play", { files: [file] });
  const current = state.queue?.current;
  if (action === "play-next" && current !== undefined) return command("POST", "/queue", { file, at: current + 1 });
  return command("POST", "/queue", { file });
}

function renderLibrarySize() {
  const library = state.status?.library;
  $("library-section").hidden = library === undefined;
  if (!library) return;
  $("library-size").textContent = library.scanning
    ? `scanning: ${library.scannedFiles} of ${library.foundFiles} files`
    : `${library.tracks} tracks${library.unreadable ? `, ${library.unreadable} unreadable` : ""}`;
}

// MARK: Plots

function colorOf(name) {
  const names = [...state.history.keys()].sort();
  return palette[names.indexOf(name) % palette.length];
}

function renderLegend() {
  const legend = $("legend");
  const names = [...state.history.keys()].sort();
  legend.replaceChildren(...names.map((name) => {
    const entry = document.createElement("span");
    entry.textContent = name;
    entry.style.setProperty("--color", colorOf(name));
    return entry;
  }));
}

function drawPlot(canvas, key, unit) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth * ratio, height = canvas.clientHeight * ratio;
  if (canvas.width !== width || canvas.height !== height) { canvas.width = width; canvas.height = height; }
  const context = canvas.getContext("2d");
  context.clearRect(0, 0, width, height);
  const now = performance.now();
  let low = Infinity, high = -Infinity, count = 0;
  for (const samples of state.history.values()) {
    for (const sample of samples) {
      const value = sample[key];
      if (value === null || sample.t < now - plotSeconds * 1000) continue;
      low = Math.min(low, value); high = Math.max(high, value); count += 1;
    }
  }
  canvas.dataset.samples = count;
  if (count === 0) return;
  if (key === "sync") { const reach = Math.max(Math.abs(low), Math.abs(high), 10); low = -reach; high = reach; }
  else { low = 0; high = Math.max(high, 1); }
  const x = (t) => ((t - (now - plotSeconds * 1000)) / (plotSeconds * 1000)) * width;
  const y = (value) => height - 6 * ratio - ((value - low) / (high - low)) * (height - 12 * ratio);
  context.strokeStyle = "#26303a";
  context.lineWidth = ratio;
  context.beginPath(); context.moveTo(0, y(key === "sync" ? 0 : low)); context.lineTo(width, y(key === "sync" ? 0 : low)); context.stroke();
  context.fillStyle = "#8b98a5";
  context.font = `${11 * ratio}px system-ui, sans-serif`;
  context.fillText(`${high.toFixed(key === "sync" ? 0 : 1)} ${unit}`, 4 * ratio, 14 * ratio);
  for (const [name, samples] of state.history) {
    context.strokeStyle = colorOf(name);
    context.lineWidth = 2 * ratio;
    context.beginPath();
    let started = false;
    for (const sample of samples) {
      if (sample[key] === null) { started = false; continue; }
      if (started) context.lineTo(x(sample.t), y(sample[key]));
      else { context.moveTo(x(sample.t), y(sample[key])); started = true; }
    }
    context.stroke();
  }
}

function drawPlots() {
  drawPlot($("sync-plot"), "sync", "µs");
  drawPlot($("buffer-plot"), "buffer", "s");
}

setInterval(tickPosition, 250);
setInterval(drawPlots, 1000);
connect();
