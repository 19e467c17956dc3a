// The share page: opens the link in this page's URL on this device. The
// link's secret is the URL's fragment, which no request carries; the page
// reads sealed bytes from its own origin only and opens them with WebCrypto
// (cli/sealed/FORMAT.md §9). Originals, "download all" and videos (a Live
// Photo's included) are decrypted as they stream by the service worker
// (sw.js) when the browser has one, and in memory otherwise.

import { linkSecret, urlKey, roleKey, indexKey, openStream, openJSON, unwrapLinkKey, WrongPassphrase } from "./sealed.js";
import { get, getBytes, Unavailable, Incomplete } from "./reads.js";

const $ = (id) => document.getElementById(id);
const base = location.pathname;
const blobURL = (hash) => `${base}/blob/${hash}`;
const assets = [];
let current = -1;
// motion is the asset whose Live Photo video the full view shows, or -1.
let motion = -1;
let opener = null;
let firstThumbnail = true;

function setState(state, text) {
  document.body.dataset.state = state;
  $("status").textContent = text;
  $("status").hidden = !text;
}

function fail(err) {
  for (const id of ["grid", "unlock", "all"]) {
    $(id).hidden = true;
  }
  if (err instanceof Unavailable) {
    setState("unavailable", "This link is no longer available.");
  } else if (err instanceof Incomplete) {
    setState("incomplete", "This link is incomplete: part of it is missing or changed. Ask for the whole link again, with everything after the #.");
  } else {
    setState("error", `The photos could not be opened: ${err.message}`);
  }
}

async function main() {
  const secret = linkSecret(location.hash.slice(1));
  if (!/\/s\/[0-9a-f]{32}$/.test(base) || !secret) {
    throw new Incomplete();
  }
  const info = await (await get(base, { headers: { Accept: "application/json" }, cache: "no-store" })).json();
  let linkKey = secret;
  if (info.passphrase_protected) {
    linkKey = await askPassphrase(await getBytes(`${base}/wrapped-secret`, { cache: "no-store" }), secret);
  }
  setState("loading", "Opening the photos…");
  const sealedIndex = await getBytes(blobURL(info.metadata_hash));
  // The fragment has the right form but is not the link's key: a link
  // changed on its way, as a link cut short is.
  const index = await openJSON(await indexKey(linkKey), sealedIndex).catch((err) => {
    throw err.name === "OperationError" ? new Incomplete() : err;
  });
  if (index.v !== 1 || !Array.isArray(index.items)) {
    throw new Error("the link's index is malformed");
  }
  await gallery(index);
}

// askPassphrase shows the form until a passphrase opens the wrapped secret.
function askPassphrase(wrapped, secret) {
  setState("locked", "");
  const form = $("unlock");
  const input = $("passphrase");
  const submit = form.querySelector("button");
  form.hidden = false;
  input.focus();
  return new Promise((resolve, reject) => {
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      $("unlock-error").textContent = "";
      submit.disabled = true;
      try {
        const key = await unwrapLinkKey(wrapped, secret, input.value);
        form.hidden = true;
        resolve(key);
      } catch (err) {
        if (!(err instanceof WrongPassphrase)) {
          reject(err);
          return;
        }
        $("unlock-error").textContent = "That passphrase is wrong. Try again.";
        input.select();
      } finally {
        submit.disabled = false;
      }
    });
  });
}

async function gallery(index) {
  const title = typeof index.title === "string" && index.title !== "" ? index.title : "Shared photos";
  $("title").textContent = title;
  document.title = title;
  const grid = $("grid");
  index.items.forEach((item, i) => {
    const li = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.setAttribute("aria-label", `Photo ${i + 1} of ${index.items.length}, opening`);
    button.addEventListener("click", () => view(i));
    const img = document.createElement("img");
    img.alt = "";
    button.append(img);
    li.append(button);
    grid.append(li);
    assets.push({ item, button, img });
  });
  grid.hidden = false;
  setState("gallery", index.items.length === 0 ? "This link shows no photos." : "");
  await pool(assets, 6, tile);
  $("all").hidden = !assets.some((a) => a.md);
  document.body.dataset.loaded = "true";
}

// pool runs fn on the items, n at a time, in order.
async function pool(items, n, fn) {
  let next = 0;
  const run = async () => {
    while (next < items.length) {
      await fn(items[next++]);
    }
  };
  await Promise.all(Array.from({ length: n }, run));
}

async function tile(a) {
  try {
    a.key = urlKey(a.item.asset_key);
    const md = await openJSON(await roleKey(a.key, "metadata"), await getBytes(blobURL(a.item.metadata_hash)));
    if (md.v !== 1 || typeof md.name !== "string" || typeof md.media_type !== "string" || !md.blobs || !md.blobs.original) {
      throw new Error("its metadata is malformed");
    }
    a.md = md;
    a.button.removeAttribute("aria-label");
    a.img.alt = md.name;
    a.button.classList.toggle("video", isVideo(md));
    if (isLive(md)) {
      const badge = document.createElement("span");
      badge.className = "live";
      badge.textContent = "LIVE";
      a.button.append(badge);
    }
    if (!md.blobs.thumbnail) {
      const label = document.createElement("span");
      label.className = "label";
      label.textContent = md.name;
      a.img.replaceWith(label);
      return;
    }
    a.thumbnail = await imageURL(a.key, "thumbnail", md.blobs.thumbnail.hash);
    a.img.src = a.thumbnail;
    await a.img.decode();
    if (firstThumbnail) {
      firstThumbnail = false;
      performance.mark("first-thumbnail");
    }
  } catch (err) {
    if (err instanceof Unavailable) {
      throw err;
    }
    a.button.setAttribute("aria-label", `A photo that could not be opened: ${err.message}`);
  }
}

const isVideo = (md) => md.media_type.startsWith("video/");

// companion is an asset's second original (cli/sealed/FORMAT.md §6.1), or
// null when its metadata names none it can use.
function companion(md) {
  const c = md.companion;
  return md.blobs.companion && c && typeof c.name === "string" && typeof c.media_type === "string" ? c : null;
}

// A Live Photo is a still whose companion is a video; a RAW+JPEG pair's
// companion is a raw file, which only downloads.
const isLive = (md) => !isVideo(md) && !!companion(md) && isVideo(companion(md));

// original is what names an asset's original of role and gives its media
// type: the metadata itself, or its companion member.
const original = (md, role) => (role === "companion" ? md.companion : md);

async function imageURL(key, role, hash) {
  const plain = await openStream(await roleKey(key, role), await getBytes(blobURL(hash)));
  return URL.createObjectURL(new Blob([plain], { type: "image/jpeg" }));
}

// view shows asset i in the full view: its preview (the thumbnail until the
// preview is open), or the video, with its name and capture date.
async function view(i) {
  const a = assets[i];
  if (!a || !a.md) {
    return;
  }
  current = i;
  const dialog = $("viewer");
  const img = $("full");
  const video = $("video");
  $("name").textContent = a.md.name;
  showTaken(a.md.taken);
  $("prev").disabled = i === 0;
  $("next").disabled = i === assets.length - 1;
  video.pause();
  video.removeAttribute("src");
  motion = -1;
  $("live").hidden = !isLive(a.md);
  $("live-note").textContent = "";
  $("live-download").hidden = true;
  video.hidden = !isVideo(a.md);
  img.hidden = isVideo(a.md);
  img.removeAttribute("src");
  delete img.dataset.shown;
  img.alt = a.md.name;
  if (!dialog.open) {
    opener = a.button;
    dialog.showModal();
  }
  try {
    if (isVideo(a.md)) {
      const url = (await offer("video", a.md.name, [a])) || (await inMemory(a));
      if (current === i) {
        video.src = url;
      }
      return;
    }
    if (a.thumbnail) {
      img.src = a.thumbnail;
      img.dataset.shown = "thumbnail";
    }
    const p = a.md.blobs.preview;
    if (p) {
      a.preview ??= imageURL(a.key, "preview", p.hash);
      const url = await a.preview;
      if (current === i) {
        img.src = url;
        img.dataset.shown = "preview";
      }
    }
  } catch (err) {
    if (current === i) {
      $("name").textContent = `${a.md.name}: could not be opened (${err.message})`;
    }
  }
}

function showTaken(t) {
  const time = $("taken");
  time.textContent = "";
  time.removeAttribute("datetime");
  if (!t || typeof t.local !== "string" || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/.test(t.local)) {
    return;
  }
  // The wall-clock time as recorded, shown as it is.
  const wall = new Date(`${t.local.slice(0, 19)}Z`);
  let text = wall.toLocaleString(undefined, { dateStyle: "long", timeStyle: "short", timeZone: "UTC" });
  let datetime = t.local;
  if (Number.isInteger(t.offset_minutes)) {
    const m = Math.abs(t.offset_minutes);
    const offset = `${t.offset_minutes < 0 ? "-" : "+"}${String(Math.floor(m / 60)).padStart(2, "0")}:${String(m % 60).padStart(2, "0")}`;
    datetime += offset;
    text += ` (UTC${offset})`;
  }
  time.dateTime = datetime;
  time.textContent = text;
}

// entry is what the service worker needs of an asset to stream one of its
// originals (role "original", or "companion": a Live Photo's video, a
// RAW+JPEG pair's raw file): where it is, its key and its size.
async function entry(a, name, role = "original") {
  const o = a.md.blobs[role];
  return { name, hash: o.hash, size: o.size, key: await roleKey(a.key, role), taken: a.md.taken && a.md.taken.local };
}

let worker;

// serviceWorker registers sw.js for the share pages and waits until it
// controls this page; null when the browser has none.
function serviceWorker() {
  if (!("serviceWorker" in navigator)) {
    return Promise.resolve(null);
  }
  worker ??= (async () => {
    await navigator.serviceWorker.register("../share-page/sw.js", { scope: "./", type: "module" });
    const reg = await navigator.serviceWorker.ready;
    if (!navigator.serviceWorker.controller) {
      await new Promise((resolve) => navigator.serviceWorker.addEventListener("controllerchange", resolve, { once: true }));
    }
    return reg;
  })().catch(() => null);
  return worker;
}

// offer hands the service worker what to stream (a file, a zip of
// several, a video's ranges) and returns the URL it answers, or null. A
// file or a video is the original of role of the list's one asset.
async function offer(kind, name, list, role = "original") {
  const reg = await serviceWorker();
  if (!reg) {
    return null;
  }
  const names = new Set();
  const entries = [];
  for (const a of list) {
    entries.push(await entry(a, unique(names, original(a.md, role).name), role));
    // An archive holds every file of the folder: a pair's second
    // original beside the first (cli/sealed/FORMAT.md §6.1).
    if (kind === "zip" && companion(a.md)) {
      entries.push(await entry(a, unique(names, a.md.companion.name), "companion"));
    }
  }
  const token = Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
  const channel = new MessageChannel();
  const ack = new Promise((resolve) => (channel.port1.onmessage = resolve));
  const type = kind === "zip" ? "application/zip" : original(list[0].md, role).media_type;
  (navigator.serviceWorker.controller || reg.active).postMessage({ token, kind, name, type, base, entries }, [channel.port2]);
  await ack;
  return `${base}/${kind}/${token}`;
}

// unique is name, or name (2), name (3)... when an earlier file had it.
function unique(names, name) {
  let n = name;
  const dot = name.lastIndexOf(".");
  const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ""];
  for (let i = 2; names.has(n.toLowerCase()); i++) {
    n = `${stem} (${i})${ext}`;
  }
  names.add(n.toLowerCase());
  return n;
}

async function inMemory(a, role = "original") {
  const plain = await openStream(await roleKey(a.key, role), await getBytes(blobURL(a.md.blobs[role].hash)));
  return URL.createObjectURL(new Blob([plain], { type: original(a.md, role).media_type }));
}

// save downloads what url answers under name. The service worker's answers
// are fetched by a hidden frame: a link with a download attribute would
// bypass the worker.
function save(url, name) {
  if (!url.startsWith("blob:")) {
    const frame = document.createElement("iframe");
    frame.hidden = true;
    frame.title = name;
    frame.src = url;
    document.body.append(frame);
    setTimeout(() => frame.remove(), 60_000);
    return;
  }
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
}

async function busy(button, work) {
  button.disabled = true;
  try {
    await work();
  } catch (err) {
    if (err instanceof Unavailable) {
      $("viewer").close();
      fail(err);
    } else {
      setState(document.body.dataset.state, `The download failed: ${err.message}`);
    }
  } finally {
    button.disabled = false;
  }
}

$("download").addEventListener("click", () =>
  busy($("download"), async () => {
    const a = assets[current];
    save((await offer("file", a.md.name, [a])) || (await inMemory(a)), a.md.name);
  }),
);

$("all").addEventListener("click", () =>
  busy($("all"), async () => {
    const name = `${$("title").textContent}.zip`;
    const url = await offer("zip", name, assets.filter((a) => a.md));
    if (!url) {
      throw new Error("this browser cannot stream an archive; download the photos one by one");
    }
    save(url, name);
  }),
);

// The Live Photo's video plays in place of its still, opened as a video's
// original is; the still comes back when it ends.
$("live").addEventListener("click", async () => {
  const i = current;
  const a = assets[i];
  const button = $("live");
  $("live-note").textContent = "";
  $("live-download").hidden = true;
  button.disabled = true;
  try {
    const url = (await offer("video", a.md.companion.name, [a], "companion")) || (await inMemory(a, "companion"));
    if (current !== i) {
      return;
    }
    motion = i;
    const video = $("video");
    video.src = url;
    video.hidden = false;
    $("full").hidden = true;
    // Refused when the browser cannot play it (the error event says so),
    // wants a gesture first (the controls give one) or another photo was
    // opened meanwhile: nothing to do here.
    video.play().catch(() => {});
  } catch (err) {
    if (err instanceof Unavailable) {
      $("viewer").close();
      fail(err);
    } else if (current === i) {
      $("live-note").textContent = `The Live Photo's video could not be opened: ${err.message}`;
    }
  } finally {
    button.disabled = false;
  }
});

const showsMotion = () => motion >= 0 && motion === current;

function still() {
  motion = -1;
  $("video").pause();
  $("video").hidden = true;
  $("full").hidden = false;
}

// cannotPlay says the browser cannot play the Live Photo's video (Chromium
// on Linux has no HEVC, the usual codec of an iPhone's) and offers the file
// instead, under its name; the still stays.
function cannotPlay() {
  const c = assets[current].md.companion;
  still();
  $("live-note").textContent = `This browser cannot play this Live Photo's video (${c.media_type}). Download it to watch it elsewhere.`;
  $("live-download").textContent = `Download ${c.name}`;
  $("live-download").hidden = false;
}

// cannotShow says the browser cannot play the video the full view shows
// (its picture at least: sound it can decode plays on), and points to the
// original's download button.
function cannotShow() {
  const md = assets[current].md;
  $("live-note").textContent = `This browser cannot play this video (${md.media_type}). Download the original to watch it elsewhere.`;
}

// The video element plays a Live Photo's video (motion) or a video asset.
const showsVideo = () => current >= 0 && motion < 0 && isVideo(assets[current].md);
$("video").addEventListener("error", () => (showsMotion() ? cannotPlay() : showsVideo() && cannotShow()));
// A video track the browser cannot decode beside sound it can plays as
// sound alone, without an error: the video then has no width.
$("video").addEventListener("loadedmetadata", () => {
  if ($("video").videoWidth === 0) {
    showsMotion() ? cannotPlay() : showsVideo() && cannotShow();
  }
});
$("video").addEventListener("ended", () => showsMotion() && still());

$("live-download").addEventListener("click", () =>
  busy($("live-download"), async () => {
    const a = assets[current];
    const name = a.md.companion.name;
    save((await offer("file", name, [a], "companion")) || (await inMemory(a, "companion")), name);
  }),
);

const step = (d) => {
  for (let i = current + d; i >= 0 && i < assets.length; i += d) {
    if (assets[i].md) {
      view(i);
      return;
    }
  }
};
$("prev").addEventListener("click", () => step(-1));
$("next").addEventListener("click", () => step(1));
$("close").addEventListener("click", () => $("viewer").close());
$("viewer").addEventListener("close", () => {
  // The close event comes a task after the dialog closed: a photo opened
  // meanwhile keeps its view.
  if ($("viewer").open) {
    return;
  }
  $("video").pause();
  $("video").removeAttribute("src");
  current = -1;
  motion = -1;
  opener?.focus();
});
document.addEventListener("keydown", (e) => {
  if (!$("viewer").open) {
    return;
  }
  if (e.key === "ArrowLeft") {
    step(-1);
  } else if (e.key === "ArrowRight") {
    step(1);
  }
});
let touchX = null;
$("full").addEventListener("pointerdown", (e) => (touchX = e.clientX));
$("full").addEventListener("pointerup", (e) => {
  if (touchX !== null && Math.abs(e.clientX - touchX) > 50) {
    step(e.clientX < touchX ? 1 : -1);
  }
  touchX = null;
});
addEventListener("hashchange", () => location.reload());

main().catch(fail);
