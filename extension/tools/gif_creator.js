// gif_creator: records a session's tab as frames (a screenshot after each
// computer action, plus start and stop) with the action taken, and exports an
// animated GIF89a encoded here in plain JavaScript (fixed 256-colour palette,
// LZW). Recordings live in the worker's memory.

import { ToolError } from '../sw/tools.js';
import { useTab } from '../sw/cdp.js';
import { captureTab, putScreenshot, SCREENSHOT_URI_PREFIX } from '../sw/screenshot.js';
import * as props from './props.js';

// ---------------------------------------------------------------------------
// Encoder (pure)

/** The fixed palette: 6 red x 7 green x 6 blue levels (252 colours) + 4 extra greys. 768 bytes RGB. */
export const PALETTE = (() => {
  const p = new Uint8Array(768);
  let i = 0;
  for (let r = 0; r < 6; r++) {
    for (let g = 0; g < 7; g++) {
      for (let b = 0; b < 6; b++) {
        p[i++] = Math.round((r * 255) / 5);
        p[i++] = Math.round((g * 255) / 6);
        p[i++] = Math.round((b * 255) / 5);
      }
    }
  }
  for (const v of [32, 96, 160, 224]) {
    p[i++] = v;
    p[i++] = v;
    p[i++] = v;
  }
  return p;
})();

let lut = null; // 32x32x32 -> nearest palette index
function nearestTable() {
  if (lut) return lut;
  lut = new Uint8Array(32768);
  for (let r = 0; r < 32; r++) {
    for (let g = 0; g < 32; g++) {
      for (let b = 0; b < 32; b++) {
        const R = (r << 3) | 4,
          Gc = (g << 3) | 4,
          B = (b << 3) | 4;
        let best = 0,
          bestD = Infinity;
        for (let k = 0; k < 256; k++) {
          const dr = R - PALETTE[k * 3],
            dg = Gc - PALETTE[k * 3 + 1],
            db = B - PALETTE[k * 3 + 2];
          const d = 3 * dr * dr + 4 * dg * dg + 2 * db * db;
          if (d < bestD) {
            bestD = d;
            best = k;
          }
        }
        lut[(r << 10) | (g << 5) | b] = best;
      }
    }
  }
  return lut;
}

/** Maps RGBA pixels to palette indices (alpha is ignored: frames are opaque). */
export function quantize(rgba) {
  const t = nearestTable();
  const n = rgba.length >> 2;
  const out = new Uint8Array(n);
  for (let i = 0, j = 0; i < n; i++, j += 4) {
    out[i] = t[((rgba[j] >> 3) << 10) | ((rgba[j + 1] >> 3) << 5) | (rgba[j + 2] >> 3)];
  }
  return out;
}

/** GIF-flavoured LZW of palette indices; returns the packed bytes (not yet split into sub-blocks). */
export function lzwEncode(indices, minCodeSize = 8) {
  const clear = 1 << minCodeSize,
    eoi = clear + 1;
  let codeSize = minCodeSize + 1,
    next = eoi + 1;
  let table = new Map();
  const out = [];
  let acc = 0,
    bits = 0;
  const emit = (code) => {
    acc |= code << bits;
    bits += codeSize;
    while (bits >= 8) {
      out.push(acc & 0xff);
      acc >>>= 8;
      bits -= 8;
    }
  };
  emit(clear);
  if (indices.length === 0) {
    emit(eoi);
    if (bits > 0) out.push(acc & 0xff);
    return Uint8Array.from(out);
  }
  let cur = indices[0];
  for (let i = 1; i < indices.length; i++) {
    const k = indices[i];
    const key = cur * 256 + k;
    const hit = table.get(key);
    if (hit !== undefined) {
      cur = hit;
      continue;
    }
    emit(cur);
    if (next === 4096) {
      emit(clear);
      table = new Map();
      next = eoi + 1;
      codeSize = minCodeSize + 1;
    } else {
      if (next >= 1 << codeSize) codeSize++;
      table.set(key, next++);
    }
    cur = k;
  }
  emit(cur);
  emit(eoi);
  if (bits > 0) out.push(acc & 0xff);
  return Uint8Array.from(out);
}

class ByteWriter {
  constructor() {
    this.chunks = [];
    this.buf = new Uint8Array(65536);
    this.n = 0;
  }
  byte(b) {
    if (this.n === this.buf.length) this.flush();
    this.buf[this.n++] = b;
  }
  u16(v) {
    this.byte(v & 0xff);
    this.byte((v >> 8) & 0xff);
  }
  bytes(a) {
    for (let i = 0; i < a.length; i++) this.byte(a[i]);
  }
  str(s) {
    for (let i = 0; i < s.length; i++) this.byte(s.charCodeAt(i));
  }
  flush() {
    this.chunks.push(this.buf.slice(0, this.n));
    this.n = 0;
  }
  result() {
    this.flush();
    const len = this.chunks.reduce((a, c) => a + c.length, 0);
    const out = new Uint8Array(len);
    let o = 0;
    for (const c of this.chunks) {
      out.set(c, o);
      o += c.length;
    }
    return out;
  }
}

/**
 * Encodes frames into an animated GIF89a.
 * @param {{rgba?: Uint8Array|Uint8ClampedArray, indices?: Uint8Array, delayMs?: number}[]} frames all width x height
 * @param {{width: number, height: number, delayMs?: number, loop?: number}} opts loop 0 = forever
 * @returns {Uint8Array}
 */
export function encodeGif(frames, { width, height, delayMs = 500, loop = 0 }) {
  if (!(width > 0 && height > 0 && width < 65536 && height < 65536)) throw new Error('bad GIF size');
  if (!frames.length) throw new Error('no frames');
  const w = new ByteWriter();
  w.str('GIF89a');
  w.u16(width);
  w.u16(height);
  w.byte(0xf7); // global colour table, 8 bits colour resolution, 256 entries
  w.byte(0);
  w.byte(0);
  w.bytes(PALETTE);
  // Looping: NETSCAPE2.0 application extension.
  w.byte(0x21);
  w.byte(0xff);
  w.byte(11);
  w.str('NETSCAPE2.0');
  w.byte(3);
  w.byte(1);
  w.u16(loop);
  w.byte(0);
  for (const f of frames) {
    const idx = f.indices || quantize(f.rgba);
    if (idx.length !== width * height) throw new Error(`frame has ${idx.length} pixels, expected ${width * height}`);
    const delay = Math.max(2, Math.round((f.delayMs ?? delayMs) / 10));
    w.byte(0x21);
    w.byte(0xf9);
    w.byte(4);
    w.byte(0x04);
    w.u16(delay);
    w.byte(0);
    w.byte(0); // GCE: dispose = keep
    w.byte(0x2c);
    w.u16(0);
    w.u16(0);
    w.u16(width);
    w.u16(height);
    w.byte(0);
    w.byte(8);
    const data = lzwEncode(idx, 8);
    for (let o = 0; o < data.length; o += 255) {
      const n = Math.min(255, data.length - o);
      w.byte(n);
      w.bytes(data.subarray(o, o + n));
    }
    w.byte(0);
  }
  w.byte(0x3b);
  return w.result();
}

export function bytesToBase64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

// ---------------------------------------------------------------------------
// Recordings

const MAX_FRAMES = 300;
const MAX_FRAME_CHARS = 60 * 1024 * 1024;
/** sessionId -> {tabId, recording, frames: [{data, mimeType, width, height, scale, action?, at}], chars, startedAt} */
const recordings = new Map();

function rec(sessionId) {
  return recordings.get(sessionId);
}

async function captureFrame(r, tabId, action) {
  // A frame is no screenshot of the model's: the coordinates of its next click stay those of its last screenshot.
  const shot = await captureTab(tabId, {
    format: 'jpeg',
    quality: 80,
    maxEdge: r.maxEdge,
    budget: 0,
    setsScale: false,
  });
  if (r.frames.length >= MAX_FRAMES || r.chars + shot.data.length > MAX_FRAME_CHARS) {
    r.truncated = true;
    return false;
  }
  r.frames.push({
    data: shot.data,
    mimeType: shot.mimeType,
    width: shot.width,
    height: shot.height,
    scale: shot.scale,
    action,
    at: Date.now(),
  });
  r.chars += shot.data.length;
  return true;
}

/**
 * Called by computer after each action: when this session is recording its
 * tab, adds a frame showing the result, with the action drawn on it at export.
 */
export async function noteAction(ctx, tabId, action) {
  const r = ctx && ctx.session ? rec(ctx.session.id) : null;
  if (!r || !r.recording || r.tabId !== tabId) return;
  if (action.action !== 'screenshot' && action.action !== 'wait') await new Promise((res) => setTimeout(res, 150));
  await captureFrame(r, tabId, action);
}

async function decodeFrame(frame, width, height, opts) {
  const blob = new Blob([Uint8Array.from(atob(frame.data), (c) => c.charCodeAt(0))], { type: frame.mimeType });
  const bmp = await createImageBitmap(blob);
  const canvas = new OffscreenCanvas(width, height);
  const g = canvas.getContext('2d');
  g.fillStyle = '#fff';
  g.fillRect(0, 0, width, height);
  g.drawImage(bmp, 0, 0, width, height);
  bmp.close && bmp.close();
  const a = frame.action;
  if (opts.showActions && a) {
    const k = (width / frame.width) * frame.scale; // CSS px -> GIF px
    if (a.point) {
      const x = a.point[0] * k,
        y = a.point[1] * k;
      g.strokeStyle = '#e00';
      g.lineWidth = 3;
      g.beginPath();
      g.arc(x, y, 12, 0, Math.PI * 2);
      g.stroke();
      g.fillStyle = '#e00';
      g.beginPath();
      g.arc(x, y, 3, 0, Math.PI * 2);
      g.fill();
    }
    const label = a.label || a.action;
    if (label) {
      const fs = Math.max(12, Math.round(height / 28));
      g.font = `bold ${fs}px sans-serif`;
      const tw = g.measureText(label).width;
      g.fillStyle = 'rgba(0,0,0,0.7)';
      g.fillRect(0, height - fs - 10, tw + 16, fs + 10);
      g.fillStyle = '#fff';
      g.fillText(label, 8, height - 8);
    }
  }
  return g.getImageData(0, 0, width, height).data;
}

function actionLabel(a) {
  if (!a) return '';
  if (a.action === 'key') return `key ${a.text}`;
  if (a.ref) return `${a.action} ${a.ref}`;
  if (a.coordinate) return `${a.action} (${a.coordinate.map(Math.round).join(', ')})`;
  return a.action;
}

async function exportGif(r, args, ctx) {
  if (!r.frames.length) {
    throw new ToolError('the recording has no frames; start_recording, act with computer, then stop_recording');
  }
  const first = r.frames[0];
  const maxW = args.max_width || first.width;
  const width = Math.min(first.width, maxW);
  const height = Math.max(1, Math.round(first.height * (width / first.width)));
  const out = [];
  for (let i = 0; i < r.frames.length; i++) {
    if (ctx.signal && ctx.signal.aborted) throw new ToolError('cancelled');
    const f = r.frames[i];
    const a = f.action ? { ...f.action, label: actionLabel(f.action) } : null;
    if (a && a.cssPoint) a.point = a.cssPoint;
    const rgba = await decodeFrame({ ...f, action: a }, width, height, { showActions: args.show_actions !== false });
    out.push({ rgba, delayMs: args.frame_delay_ms });
    ctx.progress && ctx.progress(i + 1, r.frames.length, `encoding frame ${i + 1}/${r.frames.length}`);
  }
  const bytes = encodeGif(out, { width, height, delayMs: args.frame_delay_ms || 800, loop: 0 });
  return { bytes, width, height, frames: out.length };
}

export const inputSchema = {
  type: 'object',
  properties: {
    action: {
      type: 'string',
      enum: ['start_recording', 'stop_recording', 'export', 'clear', 'status'],
    },
    frame_delay_ms: {
      type: 'integer',
      minimum: 20,
      maximum: 10000,
      default: 800,
    },
    max_width: {
      type: 'integer',
      minimum: 64,
      maximum: 1600,
    },
    show_actions: {
      type: 'boolean',
      default: true,
    },
    filename: {
      type: 'string',
      maxLength: 200,
    },
    tabId: props.tabId,
  },
  required: ['action'],
  additionalProperties: false,
};

async function run(args, ctx) {
  const sid = ctx.session.id;
  let r = rec(sid);
  switch (args.action) {
    case 'start_recording': {
      const tab = await useTab(ctx, args.tabId);
      r = {
        tabId: tab.id,
        recording: true,
        frames: [],
        chars: 0,
        startedAt: Date.now(),
        maxEdge: Math.min(args.max_width || 800, 1600),
      };
      recordings.set(sid, r);
      await captureFrame(r, tab.id, { action: 'start', at: Date.now() });
      return `Recording tab ${tab.id}. Each computer action on it adds a frame; call gif_creator stop_recording, then export.`;
    }
    case 'stop_recording': {
      if (!r) throw new ToolError('nothing is being recorded; call start_recording first');
      if (r.recording) {
        try {
          await captureFrame(r, r.tabId, { action: 'end', at: Date.now() });
        } catch {
          /* tab may be gone */
        }
      }
      r.recording = false;
      return `Recording stopped with ${r.frames.length} frames${r.truncated ? ' (frame limit reached)' : ''}. Call export to get the GIF.`;
    }
    case 'status':
      if (!r) return 'No recording in this session.';
      return `${r.recording ? 'Recording' : 'Stopped'}: tab ${r.tabId}, ${r.frames.length} frames, ${Math.round(r.chars / 1024)} KiB.`;
    case 'clear':
      recordings.delete(sid);
      return 'Recording cleared.';
    case 'export': {
      if (!r) throw new ToolError('nothing recorded in this session; call start_recording first');
      const g = await exportGif(r, args, ctx);
      const data = bytesToBase64(g.bytes);
      const name = args.filename || `recording-${new Date(r.startedAt).toISOString().replace(/[:.]/g, '-')}.gif`;
      const id = putScreenshot({ data, mimeType: 'image/gif', width: g.width, height: g.height, tabId: r.tabId });
      return {
        content: [
          { type: 'image', data, mimeType: 'image/gif' },
          { type: 'resource_link', uri: SCREENSHOT_URI_PREFIX + id, name, mimeType: 'image/gif' },
          {
            type: 'text',
            text: `GIF ${name}: ${g.frames} frames, ${g.width}x${g.height}, ${Math.round(g.bytes.length / 1024)} KiB; the resource ${SCREENSHOT_URI_PREFIX + id} (resources/read), id ${id} for upload_image.`,
          },
        ],
      };
    }
    default:
      throw new ToolError(`unknown action ${args.action}`);
  }
}

export default {
  name: 'gif_creator',
  description:
    'Records a GIF: start_recording, act, stop_recording, export (filename, max_width, frame_delay_ms, show_actions).',
  inputSchema,
  annotations: {
    readOnlyHint: false,
    destructiveHint: false,
    idempotentHint: false,
    openWorldHint: false,
  },
  run,
};
