// Screenshots sized for models: CDP Page.captureScreenshot (no 2-per-second
// limit), the long edge at most 1568 px by default, PNG or JPEG/WebP with
// quality steps (then downscaling) to stay under a base64 size budget, and an
// in-memory store so a full-resolution image can be handed out as a
// resource_link ("browserbridge://screenshots/<id>").

import { send } from './cdp.js';

export const DEFAULT_MAX_EDGE = 1568;
export const DEFAULT_BUDGET = 1024 * 1024; // base64 characters
export const SCREENSHOT_URI_PREFIX = 'browserbridge://screenshots/';
const STORE_MAX_ENTRIES = 30;
const STORE_MAX_CHARS = 96 * 1024 * 1024;

export const MIME = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };

/** Scale (<= 1) that brings a width x height image's long edge to at most maxEdge (0 or less: no limit). */
export function fitScale(width, height, maxEdge) {
  if (!maxEdge || maxEdge <= 0) return 1;
  const long = Math.max(width, height);
  if (!(long > 0)) return 1;
  return Math.min(1, maxEdge / long);
}

/** Output size of an image scaled by scale, never below 1 px. */
export function scaledSize(width, height, scale) {
  return { width: Math.max(1, Math.round(width * scale)), height: Math.max(1, Math.round(height * scale)) };
}

const QUALITY_STEPS = [85, 70, 55, 40];
const SCALE_STEPS = [0.75, 0.5, 0.35, 0.25];

/**
 * The sequence of attempts used to fit a screenshot into the size budget.
 * Each attempt is {format, quality?, scaleFactor} where scaleFactor multiplies
 * the size already chosen for the max edge. PNG asked for: PNG first, then
 * JPEG at falling qualities (unless keepFormat); JPEG/WebP: the requested
 * quality, then lower ones; after that, smaller and smaller images at the
 * lowest quality.
 */
export function budgetSteps(format = 'png', quality, { keepFormat = false } = {}) {
  const steps = [];
  if (format === 'png') {
    steps.push({ format: 'png', scaleFactor: 1 });
    if (keepFormat) {
      for (const f of SCALE_STEPS) steps.push({ format: 'png', scaleFactor: f });
      return steps;
    }
    format = 'jpeg';
    for (const q of QUALITY_STEPS) steps.push({ format, quality: q, scaleFactor: 1 });
  } else {
    const q0 = quality ?? 80;
    steps.push({ format, quality: q0, scaleFactor: 1 });
    for (const q of QUALITY_STEPS) if (q < q0) steps.push({ format, quality: q, scaleFactor: 1 });
  }
  const last = steps[steps.length - 1];
  for (const f of SCALE_STEPS) steps.push({ format: last.format, quality: last.quality, scaleFactor: f });
  return steps;
}

/**
 * Runs capture(step) through budgetSteps until the base64 result fits the
 * budget. capture returns {data, ...}. The last attempt is returned even if it
 * is still too large (with overBudget: true).
 */
export async function fitToBudget(
  capture,
  { format = 'png', quality, budget = DEFAULT_BUDGET, keepFormat = false } = {},
) {
  const steps = budgetSteps(format, quality, { keepFormat });
  let result = null;
  let attempts = 0;
  for (const step of steps) {
    attempts++;
    result = { ...(await capture(step)), step };
    if (!budget || result.data.length <= budget) return { ...result, attempts, overBudget: false };
  }
  return { ...result, attempts, overBudget: true };
}

// ---------------------------------------------------------------------------
// Image headers

function b64Prefix(b64, bytes) {
  const chars = Math.ceil(bytes / 3) * 4;
  const s = b64.slice(0, chars);
  const bin = atob(s.length % 4 ? s.slice(0, s.length - (s.length % 4)) : s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// How much of a base64 image imageSize decodes: PNG, GIF and WebP say their
// size in the first 30 bytes; a JPEG's frame header follows its metadata
// segments, so for it the prefix grows (decoding all 64 KB took 0.5-1 ms a
// call, on every screenshot).
const HEADER_PREFIXES = [64, 4096, 65536];

/** {width, height, format} of a PNG, JPEG, GIF or WebP given as base64 or bytes; null if unknown. */
export function imageSize(input) {
  if (typeof input !== 'string') return sizeFromHeader(input);
  for (const bytes of HEADER_PREFIXES) {
    const b = b64Prefix(input, bytes);
    const size = sizeFromHeader(b);
    // Only a JPEG whose frame header lies beyond this prefix needs more.
    if (size || b.length < bytes || !(b[0] === 0xff && b[1] === 0xd8)) return size;
  }
  return null;
}

function sizeFromHeader(b) {
  if (b.length >= 24 && b[0] === 0x89 && b[1] === 0x50 && b[2] === 0x4e && b[3] === 0x47) {
    const dv = new DataView(b.buffer, b.byteOffset);
    return { format: 'png', width: dv.getUint32(16), height: dv.getUint32(20) };
  }
  if (b.length >= 10 && b[0] === 0x47 && b[1] === 0x49 && b[2] === 0x46) {
    return { format: 'gif', width: b[6] | (b[7] << 8), height: b[8] | (b[9] << 8) };
  }
  if (b.length >= 4 && b[0] === 0xff && b[1] === 0xd8) {
    let i = 2;
    while (i + 9 < b.length) {
      if (b[i] !== 0xff) {
        i++;
        continue;
      }
      const marker = b[i + 1];
      if (marker === 0xff) {
        i++;
        continue;
      }
      if (marker === 0xd8 || marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
        i += 2;
        continue;
      }
      const len = (b[i + 2] << 8) | b[i + 3];
      if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
        return { format: 'jpeg', height: (b[i + 5] << 8) | b[i + 6], width: (b[i + 7] << 8) | b[i + 8] };
      }
      i += 2 + len;
    }
    return null;
  }
  if (
    b.length >= 30 &&
    String.fromCharCode(...b.slice(0, 4)) === 'RIFF' &&
    String.fromCharCode(...b.slice(8, 12)) === 'WEBP'
  ) {
    const kind = String.fromCharCode(...b.slice(12, 16));
    if (kind === 'VP8 ') {
      return { format: 'webp', width: (b[26] | (b[27] << 8)) & 0x3fff, height: (b[28] | (b[29] << 8)) & 0x3fff };
    }
    if (kind === 'VP8L') {
      const bits = b[21] | (b[22] << 8) | (b[23] << 16) | (b[24] << 24);
      return { format: 'webp', width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
    }
    if (kind === 'VP8X') {
      return {
        format: 'webp',
        width: 1 + (b[24] | (b[25] << 8) | (b[26] << 16)),
        height: 1 + (b[27] | (b[28] << 8) | (b[29] << 16)),
      };
    }
  }
  return null;
}

// ---------------------------------------------------------------------------
// Per-tab scale of the last screenshot, so coordinates read off an image can
// be mapped back to CSS pixels.

const lastScale = new Map();

export function setTabScale(tabId, info) {
  lastScale.set(tabId, info);
  if (typeof chrome !== 'undefined' && chrome.storage && chrome.storage.session) {
    chrome.storage.session.set({ [`bb.shotscale.${tabId}`]: info }).catch(() => {});
  }
}

/** {scale, cssWidth, cssHeight} of the tab's last viewport screenshot, or null. */
export async function getTabScale(tabId) {
  if (lastScale.has(tabId)) return lastScale.get(tabId);
  if (typeof chrome !== 'undefined' && chrome.storage && chrome.storage.session) {
    try {
      const k = `bb.shotscale.${tabId}`;
      const got = await chrome.storage.session.get(k);
      if (got && got[k]) {
        lastScale.set(tabId, got[k]);
        return got[k];
      }
    } catch {
      /* ignore */
    }
  }
  return null;
}

/** Maps a point in the last screenshot's pixels to CSS pixels of the viewport. */
export function imageToCss(point, scaleInfo) {
  const s = scaleInfo && scaleInfo.scale > 0 ? scaleInfo.scale : 1;
  return [point[0] / s, point[1] / s];
}

// ---------------------------------------------------------------------------
// Store

const store = new Map();
let storeChars = 0;
let seq = 0;

export function putScreenshot({ data, mimeType, width, height, tabId }) {
  const id = `shot_${Date.now().toString(36)}_${(++seq).toString(36)}`;
  store.set(id, { id, data, mimeType, width, height, tabId, createdAt: Date.now() });
  storeChars += data.length;
  while (store.size > STORE_MAX_ENTRIES || (storeChars > STORE_MAX_CHARS && store.size > 1)) {
    const [oldId, old] = store.entries().next().value;
    store.delete(oldId);
    storeChars -= old.data.length;
  }
  return id;
}

export function getScreenshot(id) {
  return store.get(id) || null;
}

export function listScreenshots() {
  return [...store.values()].map(({ data, ...meta }) => ({ ...meta, uri: SCREENSHOT_URI_PREFIX + meta.id }));
}

/** For an MCP resources/read handler: {contents: [{uri, mimeType, blob}]} or null. */
export function readScreenshotResource(uri) {
  if (typeof uri !== 'string' || !uri.startsWith(SCREENSHOT_URI_PREFIX)) return null;
  const e = getScreenshot(uri.slice(SCREENSHOT_URI_PREFIX.length));
  if (!e) return null;
  return { contents: [{ uri, mimeType: e.mimeType, blob: e.data }] };
}

// ---------------------------------------------------------------------------
// Capture

// What getLayoutMetrics does not say: the device pixel ratio (the screen's
// scale times the page zoom; the ratio of its visualViewport to its
// cssVisualViewport is the page zoom alone) and the window's size with its
// scrollbars.
const WINDOW_EXPRESSION = '[window.devicePixelRatio, window.innerWidth, window.innerHeight]';

/**
 * Viewport geometry in CSS px plus devicePixelRatio, and wholeWindow: whether
 * the viewport is all the tab shows (no scrollbar, no pinch zoom), so that a
 * capture without a clip shows exactly it. The two questions go to the page
 * together.
 */
export async function viewportMetrics(tabId) {
  const [m, w] = await Promise.all([
    send(tabId, 'Page.getLayoutMetrics', {}),
    send(tabId, 'Runtime.evaluate', { expression: WINDOW_EXPRESSION, returnByValue: true }).catch(() => null),
  ]);
  const vv = m.cssVisualViewport || m.visualViewport || {};
  const [dpr, innerWidth, innerHeight] = Array.isArray(w?.result?.value) ? w.result.value : [];
  const width = vv.clientWidth || (m.cssLayoutViewport && m.cssLayoutViewport.clientWidth) || 800;
  const height = vv.clientHeight || (m.cssLayoutViewport && m.cssLayoutViewport.clientHeight) || 600;
  return {
    pageX: vv.pageX || 0,
    pageY: vv.pageY || 0,
    width,
    height,
    contentWidth: (m.cssContentSize || m.contentSize || {}).width,
    contentHeight: (m.cssContentSize || m.contentSize || {}).height,
    dpr: typeof dpr === 'number' && dpr > 0 ? dpr : 1,
    wholeWindow:
      (vv.scale ?? 1) === 1 &&
      !vv.offsetX &&
      !vv.offsetY &&
      Number.isInteger(width) &&
      Number.isInteger(height) &&
      innerWidth === width &&
      innerHeight === height,
  };
}

/**
 * Captures a tab (its viewport, or region = [x0, y0, x1, y1] in viewport CSS
 * px) with the long edge at most maxEdge (0: device resolution) and the
 * base64 under budget. Returns {data, mimeType, format, quality, width,
 * height, scale (image px per CSS px), region, overBudget, attempts}.
 * A viewport image becomes the tab's scale (coordinates of later actions are
 * read off it) unless setsScale is false: an image no model reads
 * coordinates from (a GIF frame) must not change what the model's last
 * screenshot's coordinates mean.
 */
export async function captureTab(
  tabId,
  {
    format = 'png',
    quality,
    maxEdge = DEFAULT_MAX_EDGE,
    budget = DEFAULT_BUDGET,
    region,
    keepFormat = false,
    fullPage = false,
    setsScale = true,
  } = {},
) {
  const vm = await viewportMetrics(tabId);
  let clip;
  if (region) {
    const [x0, y0, x1, y1] = region;
    const x = Math.max(0, Math.min(x0, x1)),
      y = Math.max(0, Math.min(y0, y1));
    const w = Math.abs(x1 - x0),
      h = Math.abs(y1 - y0);
    if (!(w >= 1 && h >= 1)) throw new Error('the region must be at least 1x1 CSS pixels');
    clip = { x: vm.pageX + x, y: vm.pageY + y, width: w, height: h };
  } else if (fullPage && vm.contentWidth && vm.contentHeight) {
    clip = { x: 0, y: 0, width: vm.contentWidth, height: vm.contentHeight };
  } else {
    clip = { x: vm.pageX, y: vm.pageY, width: vm.width, height: vm.height };
  }
  const baseScale = fitScale(clip.width * vm.dpr, clip.height * vm.dpr, maxEdge);
  // For a zoom on a small region, allow magnification up to the max edge (at most 4x).
  const zoomScale =
    region && maxEdge > 0 ? Math.min(4, maxEdge / (Math.max(clip.width, clip.height) * vm.dpr)) : baseScale;
  const scale0 = region ? Math.max(baseScale, zoomScale) : baseScale;

  // The viewport at device resolution needs no clip when it is the whole
  // window. Chrome then copies the tab's next frame as it is; with a clip it
  // first sets the renderer's viewport to the clip and puts it back after.
  const plain = !region && !fullPage && vm.wholeWindow;
  const captureOnce = async ({ format: f, quality: q, scaleFactor }) => {
    let s = scale0 * scaleFactor;
    const want = scaledSize(clip.width * vm.dpr, clip.height * vm.dpr, s);
    const params = { format: f, fromSurface: true };
    if (f !== 'png' && q !== undefined) params.quality = q;
    const shoot = (scale) =>
      send(
        tabId,
        'Page.captureScreenshot',
        { ...params, clip: { ...clip, scale }, captureBeyondViewport: !!(fullPage || region) },
        { timeoutMs: 30000 },
      );
    let r, size;
    if (plain && s === 1) {
      r = await send(tabId, 'Page.captureScreenshot', params, { timeoutMs: 30000 });
      size = imageSize(r.data);
      // Not the viewport after all (the page resized between the questions
      // and the capture, or answered them itself): capture the clip.
      if (!size || size.width !== want.width || size.height !== want.height) r = null;
    }
    if (!r) {
      r = await shoot(s);
      size = imageSize(r.data);
      // Some builds apply devicePixelRatio on top of clip.scale: correct once.
      if (size && Math.abs(size.width - want.width) > 2 && size.width > 0) {
        s = s * (want.width / size.width);
        r = await shoot(s);
        size = imageSize(r.data) || size;
      }
    }
    return {
      data: r.data,
      format: f,
      quality: f === 'png' ? undefined : q,
      width: size ? size.width : want.width,
      height: size ? size.height : want.height,
    };
  };

  const res = await fitToBudget(captureOnce, { format, quality, budget, keepFormat });
  const out = {
    data: res.data,
    mimeType: MIME[res.format],
    format: res.format,
    quality: res.quality,
    width: res.width,
    height: res.height,
    scale: res.width / clip.width,
    region: { x: clip.x - vm.pageX, y: clip.y - vm.pageY, width: clip.width, height: clip.height },
    viewport: { width: vm.width, height: vm.height, dpr: vm.dpr },
    overBudget: res.overBudget,
    attempts: res.attempts,
  };
  if (setsScale && !region && !fullPage) {
    setTabScale(tabId, {
      scale: out.scale,
      cssWidth: clip.width,
      cssHeight: clip.height,
      width: out.width,
      height: out.height,
      at: Date.now(),
    });
  }
  return out;
}

/** Captures the viewport at device resolution as PNG and stores it; returns the store entry with its uri. */
export async function captureFullResolution(tabId) {
  const r = await send(tabId, 'Page.captureScreenshot', { format: 'png', fromSurface: true }, { timeoutMs: 30000 });
  // The PNG's header has its size; the page is asked only if it does not.
  let size = imageSize(r.data);
  if (!size) {
    const vm = await viewportMetrics(tabId);
    size = { width: Math.round(vm.width * vm.dpr), height: Math.round(vm.height * vm.dpr) };
  }
  const id = putScreenshot({ data: r.data, mimeType: 'image/png', width: size.width, height: size.height, tabId });
  return {
    id,
    uri: SCREENSHOT_URI_PREFIX + id,
    mimeType: 'image/png',
    width: size.width,
    height: size.height,
    chars: r.data.length,
  };
}
