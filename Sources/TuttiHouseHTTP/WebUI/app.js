// Tutti's web UI: the house as /api/events shows it, driven through /api (docs/HTTP-API.md).
// No build step and nothing from outside the house: plain modules, as the browser runs them.

const $ = (id) => document.getElementById(id);
const palette = ["#4fb3ff", "#ffb454", "#6bd18a", "#ff6b9a", "#b18cff", "#5ce1e6", "#f5e663", "#ff8a5c"];
const plotSeconds = 60;

const state = {
  // The house's groups (GroupsReport.groups), each one's last status and queue by name, and the
  // group this page's now playing, queue and library act on.
  groups: [],
  statuses: new Map(),
  // performance.now() when each group's status arrived (the feed resends one only on a change).
  statusTimes: new Map(),
  queues: new Map(),
  // The shown group, by id: a rename elsewhere keeps it shown, and its routes right.
  selectedId: null,
  // Every room of the house (the default group's status lists them).
  rooms: [],
  // The selected group's status and queue.
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
  // Signed out meanwhile (the house's token was replaced): back to the login form.
  if (response.status === 401 && !path.startsWith("/login")) showLogin();
  if (!response.ok) throw new Error(reply.error ?? `${method} ${path}: HTTP ${response.status}`);
  return reply;
}

// MARK: Signing in

// The house answers only its controllers: this page signs in once with a pairing code or the
// controller token, and the house gives it a session cookie that no script can read.
let started = false;
function showLogin() {
  $("house").hidden = true;
  $("pair").hidden = true;
  $("sign-out").hidden = true;
  $("login").hidden = false;
  $("login-secret").focus();
}

function showHouse() {
  $("login").hidden = true;
  $("house").hidden = false;
  $("pair").hidden = false;
  $("sign-out").hidden = false;
  if (!started) {
    started = true;
    connect();
  }
}

$("login-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const secret = $("login-secret").value.trim();
  const error = $("login-error");
  try {
    await api("POST", "/login", /^[0-9][0-9 -]*$/.test(secret) ? { code: secret } : { token: secret });
    $("login-secret").value = "";
    error.hidden = true;
    showHouse();
  } catch (failure) {
    error.textContent = failure.message;
    error.hidden = false;
  }
});

let pairingTimer = 0;
$("pair").addEventListener("click", async () => {
  const reply = await command("POST", "/pair-controller");
  if (reply === null) return;
  clearTimeout(pairingTimer);
  const box = $("pairing");
  // A page opened as localhost names the house as the phone will reach it: NAME.local.
  const local = ["localhost", "127.0.0.1", "[::1]"].includes(location.hostname) && localName !== null;
  const address = local ? `${location.protocol}//${localName}${location.port ? ":" + location.port : ""}` : location.origin;
  box.replaceChildren("On the phone, open ", Object.assign(document.createElement("code"), { textContent: address }),
    " and enter ", Object.assign(document.createElement("strong"), { textContent: reply.code }),
    ` (once, within ${Math.round(reply.validSeconds / 60)} minutes).`);
  box.hidden = false;
  pairingTimer = setTimeout(() => { box.hidden = true; }, reply.validSeconds * 1000);
});

// Signing out drops this browser's cookie; the feed, signed in when it opened, is closed too.
$("sign-out").addEventListener("click", async () => {
  await command("POST", "/logout");
  feedSocket?.close();
});

let localName = null;
async function start() {
  const session = await fetch("/api/session").then((response) => response.json()).catch(() => ({ signedIn: false }));
  localName = session.localName ?? null;
  if (session.signedIn) showHouse(); else showLogin();
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

/// `path` of the API on a group, by id (every group's operations are under /api/groups/ID):
/// the shown group's unless another is named.
function groupPath(path, id = state.selectedId) {
  return id === null ? path : `/groups/${id}${path}`;
}

/// The shown group's name, or null before the groups are known.
function selectedName() {
  return state.groups.find((group) => group.id === state.selectedId)?.name ?? null;
}

function basename(path) {
  return path.split("/").filter(Boolean).pop() ?? path;
}

// MARK: The feed

let feedSocket = null;
function connect() {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  const feed = new WebSocket(`${scheme}://${location.host}/api/events`);
  feedSocket = feed;
  const indicator = $("connection");
  feed.onopen = () => { indicator.dataset.state = "open"; indicator.textContent = "live"; };
  feed.onmessage = (event) => {
    const message = JSON.parse(event.data);
    // The groups first, then each group's status and queue, tagged with its name.
    if (message.event === "groups") receiveGroups(message.groups.groups);
    else if (message.event === "status") receiveStatus(message.group, message.status);
    else if (message.event === "queue") receiveQueue(message.group, message.queue);
  };
  feed.onclose = () => {
    indicator.dataset.state = "closed";
    indicator.textContent = "reconnecting…";
    // A refused upgrade looks like any closed socket: ask whether this page is still signed in.
    setTimeout(async () => {
      const session = await fetch("/api/session").then((response) => response.json()).catch(() => ({ signedIn: true }));
      if (session.signedIn) connect();
      else { started = false; showLogin(); }
    }, 1000);
  };
}

function receiveGroups(groups) {
  state.groups = groups;
  const names = new Set(groups.map((group) => group.name));
  for (const name of [...state.statuses.keys()]) if (!names.has(name)) state.statuses.delete(name);
  for (const name of [...state.queues.keys()]) if (!names.has(name)) state.queues.delete(name);
  // The shown group stays shown across a rename; once removed, the default group is shown.
  const shown = groups.some((group) => group.id === state.selectedId) ? state.selectedId : groups.find((group) => group.isDefault)?.id ?? null;
  selectGroup(shown);
  if (state.rooms.length) renderRooms();
}

/// Shows group `id`'s now playing and queue, and makes the transport, queue and library act on it.
function selectGroup(id) {
  state.selectedId = id;
  const name = selectedName();
  state.status = state.statuses.get(name) ?? null;
  state.statusAt = state.statusTimes.get(name) ?? performance.now();
  state.queue = state.queues.get(name) ?? null;
  $("selected-group").textContent = name ?? "";
  $("group-volume-label").textContent = name ?? "Group";
  if (state.status) {
    renderStatus();
    renderRooms();
  } else {
    // Nothing of this group yet: not the last group's now playing.
    $("title").textContent = "Nothing playing";
    $("artist-album").textContent = "";
    $("state").textContent = "";
  }
  // Not the last group's queue, whose indexes would act on this one.
  if (state.queue) renderQueue(); else $("queue").replaceChildren();
  renderGroups();
}

function receiveQueue(group, queue) {
  state.queues.set(group, queue);
  if (group === selectedName()) { state.queue = queue; renderQueue(); }
  renderGroups();
}

function receiveStatus(group, status) {
  state.statuses.set(group, status);
  state.statusTimes.set(group, performance.now());
  // Only the default group's status lists the rooms (the others' would repeat them).
  if (state.groups.find((candidate) => candidate.name === group)?.isDefault) {
    receiveRooms(status.rooms);
    renderWaiting(status.waiting ?? []);
  }
  if (group === selectedName()) {
    state.status = status;
    state.statusAt = performance.now();
    renderStatus();
    renderRooms();
  }
  renderGroups();
}

function receiveRooms(rooms) {
  state.rooms = rooms;
  const now = performance.now();
  for (const room of rooms) {
    if (!state.history.has(room.name)) state.history.set(room.name, []);
    const samples = state.history.get(room.name);
    samples.push({ t: now, buffer: room.bufferSeconds ?? null, sync: room.syncErrorMicroseconds ?? null });
    while (samples.length && samples[0].t < now - plotSeconds * 1000) samples.shift();
  }
  if (state.status) renderRooms();
  const defaultStatus = state.statuses.get(state.groups.find((group) => group.isDefault)?.name);
  renderLibrarySize(defaultStatus?.library);
  // Changes the house cannot keep across a restart (its disk full, say): said until it can again.
  const storeProblem = $("store-problem");
  storeProblem.hidden = !defaultStatus?.storeProblem;
  storeProblem.textContent = defaultStatus?.storeProblem ? `Not kept across a restart: ${defaultStatus.storeProblem}` : "";
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
  showArtwork(status.path, status.source?.artworkRevision !== undefined ? `${status.groupId}:${status.source.artworkRevision}` : undefined);
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
  renderCrossfade(status.crossfadeSeconds ?? 0);
}

/// The group's crossfade: a setting another controller made (say 5 s over MPD) is shown as it is.
function renderCrossfade(seconds) {
  const select = $("crossfade");
  if (document.activeElement === select) return;
  const value = String(seconds);
  if (![...select.options].some((option) => option.value === value)) {
    select.append(Object.assign(document.createElement("option"), { value, textContent: `${seconds} s` }));
  }
  select.value = value;
}

$("crossfade").addEventListener("change", () => command("POST", groupPath("/crossfade"), { seconds: Number($("crossfade").value) }));

/// The item's cover art, or the note when it has none (the house answers a placeholder rather
/// than a 404) or is a stream.
function showArtwork(path, live) {
  const image = $("art");
  // A live source's cover, by group and revision: a new cover is a new address.
  const key = live ? `live:${live}` : (path ?? "");
  const source = live ? `/api/artwork?live=${encodeURIComponent(live.split(":")[0])}&revision=${live.split(":")[1]}`
    : path && path.startsWith("/") ? artworkURL(path) : "";
  if (image.dataset.path === key) return;
  image.dataset.path = key;
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
  await command("POST", groupPath("/transport/seek"), { seconds: Number($("seek").value) });
  seeking = false;
});

$("play-pause").addEventListener("click", () => {
  const status = state.status;
  if (!status) return;
  return playPause(state.selectedId);
});
$("next").addEventListener("click", () => command("POST", groupPath("/transport/next")));
$("previous").addEventListener("click", () => command("POST", groupPath("/transport/previous")));

/// Pauses group `id` if it plays, resumes it if paused, else plays its queue from the item it
/// was at.
function playPause(id) {
  const name = state.groups.find((group) => group.id === id)?.name;
  const status = state.statuses.get(name);
  if (!status) return null;
  if (status.state === "playing" || status.state === "starting") return command("POST", groupPath("/transport/pause", id));
  if (status.state === "paused") return command("POST", groupPath("/transport/resume", id));
  if ((state.queues.get(name)?.items ?? []).length === 0) return showMessage(`The queue of ${name} is empty: add a file or a URL first.`);
  return command("POST", groupPath(`/queue/${status.item ?? 0}/play`, id));
}

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

sendsVolume($("group-volume"), $("group-volume-value"), () => command("PUT", groupPath("/volume"), { percent: Number($("group-volume").value) }));

function makeRoomView(name) {
  const item = document.createElement("li");
  item.className = "room";
  item.dataset.room = name;
  item.innerHTML = `
    <label><span class="name"></span> <span class="subtle state"></span> <select class="room-group"></select></label>
    <div class="volume"><input type="range" class="volume-slider" min="0" max="100" step="1"><output></output></div>
    <div class="health"></div>
    <div class="room-settings">
      <label>latency <input type="number" class="latency" min="0" max="2000" step="1" inputmode="decimal"> ms</label>
      <label class="channel-setting">plays <select class="channel">
        <option value="stereo">stereo</option><option value="left">left</option><option value="right">right</option><option value="mono">mono</option>
      </select></label>
      <label class="pair-setting">pair with <select class="pair-with"></select></label>
      <span class="pair-halves"></span>
      <button type="button" class="unpair" hidden>Unpair</button>
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
  const channel = item.querySelector(".channel");
  channel.setAttribute("aria-label", `${name} plays`);
  channel.addEventListener("change", () => command("PUT", `/rooms/${encodeURIComponent(name)}/channel`, { channel: channel.value }));
  // A stereo pair: this room the left half, the one chosen the right; the pair's name asked.
  const pairWith = item.querySelector(".pair-with");
  pairWith.setAttribute("aria-label", `Pair ${name} with`);
  pairWith.addEventListener("change", () => {
    const right = pairWith.value;
    pairWith.value = "";
    if (!right) return;
    const pairName = window.prompt(`Name of the stereo pair: ${name} plays left, ${right} right`, name);
    if (pairName && pairName.trim()) command("POST", "/pairs", { left: name, right, name: pairName.trim() });
  });
  item.querySelector(".unpair").addEventListener("click", () => command("DELETE", `/pairs/${encodeURIComponent(name)}`));
  // The keyboard's way to move a room (the pointer's is a drag between the group cards).
  const select = item.querySelector(".room-group");
  select.setAttribute("aria-label", `${name}'s group`);
  select.addEventListener("change", () => moveRoom(name, Number(select.value)));
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

/// Speakers the house does not know yet: each with the code its own log shows, and Admit.
function renderWaiting(waiting) {
  const list = $("waiting");
  const key = waiting.map((speaker) => `${speaker.name}\t${speaker.code}`).join("\n");
  if (list.dataset.key === key) return;
  list.dataset.key = key;
  list.replaceChildren(...waiting.map((speaker) => {
    const item = document.createElement("li");
    item.className = "waiting-speaker";
    item.dataset.speaker = speaker.name;
    const text = document.createElement("span");
    text.textContent = `${speaker.name} waits to be admitted (from ${speaker.address}). Its log shows the code `;
    const code = Object.assign(document.createElement("strong"), { className: "admission-code", textContent: speaker.code });
    text.append(code, ": admit it only if they match.");
    const admit = Object.assign(document.createElement("button"), { type: "button", className: "admit", textContent: "Admit" });
    admit.addEventListener("click", () => command("POST", `/speakers/${encodeURIComponent(speaker.code.replace(/\s/g, ""))}/admit`));
    item.append(text, admit);
    return item;
  }));
}

function renderRooms() {
  if (!state.status) return;
  const rooms = state.rooms;
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
    const select = view.querySelector(".room-group");
    const options = state.groups.map((group) => `${group.id}\t${group.name}`);
    if ([...select.options].map((option) => `${option.value}\t${option.textContent}`).join("\n") !== options.join("\n")) {
      select.replaceChildren(...state.groups.map((group) => Object.assign(document.createElement("option"), { value: group.id, textContent: group.name })));
    }
    const id = state.groups.find((group) => group.name === room.group)?.id;
    if (document.activeElement !== select && id !== undefined) select.value = id;
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
    renderPairing(view, room, rooms);
    view.querySelector(".health").textContent = health.join(" · ");
    view.querySelector(".problem").textContent = room.problem ?? "";
  });
  renderLegend();
}

/// A room's channel and pairing: a stereo pair shows its halves and Unpair; a single room, its
/// channel and the rooms it could be paired with.
function renderPairing(view, room, rooms) {
  const pair = room.pair;
  view.querySelector(".channel-setting").hidden = Boolean(pair);
  view.querySelector(".pair-setting").hidden = Boolean(pair);
  view.querySelector(".unpair").hidden = !pair;
  view.querySelector(".pair-halves").textContent = pair ? `stereo pair: ${pair.left.name} (left) + ${pair.right.name} (right)` : "";
  if (pair) return;
  const channel = view.querySelector(".channel");
  if (document.activeElement !== channel) channel.value = room.channel ?? "stereo";
  const pairWith = view.querySelector(".pair-with");
  const others = rooms.filter((other) => other.name !== room.name && !other.pair).map((other) => other.name);
  if ([...pairWith.options].slice(1).map((option) => option.value).join("\n") !== others.join("\n")) {
    pairWith.replaceChildren(Object.assign(document.createElement("option"), { value: "", textContent: "…" }),
                             ...others.map((other) => Object.assign(document.createElement("option"), { value: other, textContent: other })));
  }
}

// MARK: Groups

const icons = { play: "M7 4v16l13-8z", pause: "M6 4h4v16H6zM14 4h4v16h-4z", next: "M5 4v16l11-8zM17 4h3v16h-3z" };

/// Moves `room` into group `id`: it plays what the group plays, in sync with its rooms.
function moveRoom(room, id) {
  return command("POST", groupPath(`/rooms/${encodeURIComponent(room)}/join`, id));
}

/// The groups side by side, each with what it plays, its transport, its volume, its rooms (to
/// drag onto another group) and the head of its queue. Cards are kept, not redrawn, so that a
/// slider under the user's finger or a drag is not interrupted by the feed.
function renderGroups() {
  const box = $("groups");
  const existing = new Map([...box.children].map((card) => [Number(card.dataset.groupId), card]));
  const cards = state.groups.map((group) => existing.get(group.id) ?? makeGroupCard(group.id));
  for (const card of [...box.children]) if (!cards.includes(card)) card.remove();
  cards.forEach((card, index) => {
    if (box.children[index] !== card) box.insertBefore(card, box.children[index] ?? null);
    fillGroupCard(card, state.groups[index]);
  });
}

/// A group's card, by id: its name (which a rename changes) is filled in by `fillGroupCard`.
function makeGroupCard(id) {
  const card = document.createElement("article");
  card.className = "group-card";
  card.dataset.groupId = id;
  card.innerHTML = `
    <header><button type="button" class="group-name"></button><span class="subtle group-state"></span></header>
    <div class="group-title"></div>
    <div class="group-controls">
      <button type="button" class="group-play-pause"><svg viewBox="0 0 24 24"><path d="${icons.play}"/></svg></button>
      <button type="button" class="group-next"><svg viewBox="0 0 24 24"><path d="${icons.next}"/></svg></button>
      <input type="range" class="group-volume-slider" min="0" max="100" step="1"><output></output>
    </div>
    <ul class="group-rooms"></ul>
    <ol class="group-queue"></ol>`;
  card.querySelector(".group-name").addEventListener("click", () => selectGroup(id));
  card.querySelector(".group-play-pause").addEventListener("click", () => playPause(id));
  card.querySelector(".group-next").addEventListener("click", () => command("POST", groupPath("/transport/next", id)));
  const slider = card.querySelector(".group-volume-slider");
  sendsVolume(slider, card.querySelector("output"), () => command("PUT", groupPath("/volume", id), { percent: Number(slider.value) }));
  return card;
}

function fillGroupCard(card, group) {
  const status = state.statuses.get(group.name);
  // The name is the user's: text and attributes, never markup.
  card.dataset.group = group.name;
  const nameButton = card.querySelector(".group-name");
  nameButton.textContent = group.name;
  nameButton.setAttribute("aria-label", `Show ${group.name}`);
  card.querySelector(".group-next").setAttribute("aria-label", `Next in ${group.name}`);
  card.querySelector(".group-volume-slider").setAttribute("aria-label", `${group.name} volume`);
  card.classList.toggle("selected", group.id === state.selectedId);
  card.querySelector(".group-state").textContent = status?.state ?? group.state;
  const title = status?.title && status.artist && status.title.startsWith(status.artist + " – ") ? status.title.slice(status.artist.length + 3) : status?.title;
  card.querySelector(".group-title").textContent = title ? basename(title) : "Nothing playing";
  const playing = status?.state === "playing" || status?.state === "starting";
  const button = card.querySelector(".group-play-pause");
  button.querySelector("path").setAttribute("d", playing ? icons.pause : icons.play);
  button.setAttribute("aria-label", `${playing ? "Pause" : "Play"} ${group.name}`);
  const slider = card.querySelector(".group-volume-slider");
  slider.hidden = card.querySelector(".group-controls output").hidden = group.volume === undefined;
  if (group.volume !== undefined && document.activeElement !== slider) {
    slider.value = group.volume;
    card.querySelector(".group-controls output").textContent = group.volume;
  }
  const rooms = card.querySelector(".group-rooms");
  if ([...rooms.children].map((chip) => chip.dataset.room ?? "").join("\n") !== group.rooms.join("\n") || group.rooms.length === 0) {
    rooms.replaceChildren(...group.rooms.map((room) => {
      const chip = Object.assign(document.createElement("li"), { className: "room-chip", textContent: room, title: `Drag ${room} onto another group` });
      chip.dataset.room = room;
      chip.addEventListener("pointerdown", (event) => startRoomDrag(event, chip));
      return chip;
    }));
    if (group.rooms.length === 0) rooms.append(Object.assign(document.createElement("li"), { className: "subtle", textContent: "No room: drag one here" }));
  }
  const queue = state.queues.get(group.name)?.items ?? [];
  const shown = queue.slice(0, 5).map((item) => {
    const row = Object.assign(document.createElement("li"), { textContent: item.title ? basename(item.title) : basename(item.path) });
    if (item.current) row.className = "current";
    return row;
  });
  if (queue.length > 5) shown.push(Object.assign(document.createElement("li"), { className: "subtle more", textContent: `and ${queue.length - 5} more` }));
  card.querySelector(".group-queue").replaceChildren(...shown);
}

/// Moves a room by pointer (mouse, touch or pen alike): a copy of its chip follows the pointer,
/// the group card under it lights up, and where it is let go the house moves the room there.
function startRoomDrag(event, chip) {
  // One finger, or the mouse's main button: not a right click, not a second finger.
  if (!event.isPrimary || event.button !== 0) return;
  event.preventDefault();
  const pointer = event.pointerId;
  const room = chip.dataset.room;
  const from = chip.closest(".group-card")?.dataset.groupId;
  const ghost = chip.cloneNode(true);
  ghost.classList.add("ghost");
  document.body.append(ghost);
  let over = null;
  const move = (moveEvent) => {
    if (moveEvent.pointerId !== pointer) return;
    ghost.style.left = `${moveEvent.clientX}px`;
    ghost.style.top = `${moveEvent.clientY}px`;
    const target = document.elementFromPoint(moveEvent.clientX, moveEvent.clientY)?.closest(".group-card") ?? null;
    if (target !== over) {
      over?.classList.remove("drop-target");
      over = target;
      over?.classList.add("drop-target");
    }
  };
  const end = (endEvent) => {
    if (endEvent.pointerId !== pointer) return;
    window.removeEventListener("pointermove", move);
    window.removeEventListener("pointerup", end);
    window.removeEventListener("pointercancel", end);
    ghost.remove();
    over?.classList.remove("drop-target");
    if (endEvent.type === "pointerup" && over && over.dataset.groupId !== from) moveRoom(room, Number(over.dataset.groupId));
  };
  move(event);
  window.addEventListener("pointermove", move);
  window.addEventListener("pointerup", end);
  window.addEventListener("pointercancel", end);
}

$("new-group-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const input = $("new-group-name");
  const name = input.value.trim();
  if (!name) return;
  if (await command("POST", "/groups", { name })) input.value = "";
});

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
    row.querySelector(".remove").addEventListener("click", () => command("DELETE", groupPath(`/queue/${item.index}`)));
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
    if (to !== from) command("POST", groupPath("/queue/move"), { from, to });
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
  if (action === "play-now") return command("POST", groupPath("/transport/play"), { files: [file] });
  const current = state.queue?.current;
  if (action === "play-next" && current !== undefined) return command("POST", groupPath("/queue"), { file, at: current + 1 });
  return command("POST", groupPath("/queue"), { file });
}

function renderLibrarySize(library) {
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
start();
