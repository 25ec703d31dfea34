// The GIF89a encoder: header, palette, looping extension, frames and trailer
// parse as GIF blocks; the LZW data decodes back to the same pixels.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeGif, lzwEncode, quantize, PALETTE, bytesToBase64 } from '../tools/gif_creator.js';
import { imageSize } from '../sw/screenshot.js';

function lzwDecode(data, minCodeSize, expected) {
  const clear = 1 << minCodeSize,
    eoi = clear + 1;
  let codeSize = minCodeSize + 1;
  let dict = [];
  const reset = () => {
    dict = [];
    for (let i = 0; i < clear; i++) dict.push([i]);
    dict.push(null, null);
    codeSize = minCodeSize + 1;
  };
  reset();
  const out = [];
  let bitPos = 0,
    prev = null;
  const read = () => {
    let v = 0;
    for (let i = 0; i < codeSize; i++, bitPos++) {
      const byte = data[bitPos >> 3];
      if (byte === undefined) throw new Error('ran out of data');
      v |= ((byte >> (bitPos & 7)) & 1) << i;
    }
    return v;
  };
  for (;;) {
    const code = read();
    if (code === clear) {
      reset();
      prev = null;
      continue;
    }
    if (code === eoi) break;
    let entry;
    if (prev === null) entry = dict[code];
    else if (code < dict.length) {
      entry = dict[code];
      dict.push([...dict[prev], entry[0]]);
    } else if (code === dict.length) {
      entry = [...dict[prev], dict[prev][0]];
      dict.push(entry);
    } else throw new Error(`bad code ${code}`);
    out.push(...entry);
    prev = code;
    if (dict.length === 1 << codeSize && codeSize < 12) codeSize++;
    if (out.length > expected * 2) throw new Error('runaway');
  }
  return out;
}

/** Walks the GIF block structure; returns {width, height, frames: [{delay, indices}], loop}. */
function parseGif(b) {
  assert.equal(String.fromCharCode(...b.slice(0, 6)), 'GIF89a');
  const width = b[6] | (b[7] << 8),
    height = b[8] | (b[9] << 8);
  const flags = b[10];
  let p = 13;
  if (flags & 0x80) p += 3 * (1 << ((flags & 7) + 1));
  const frames = [];
  let delay = 0,
    loop = null;
  const subBlocks = () => {
    const parts = [];
    for (;;) {
      const n = b[p++];
      if (n === 0) break;
      parts.push(...b.slice(p, p + n));
      p += n;
    }
    return Uint8Array.from(parts);
  };
  for (;;) {
    const t = b[p++];
    if (t === 0x3b) break;
    if (t === 0x21) {
      const label = b[p++];
      const body = subBlocks();
      if (label === 0xf9) delay = body[1] | (body[2] << 8);
      if (label === 0xff && String.fromCharCode(...body.slice(0, 11)) === 'NETSCAPE2.0') {
        loop = body[12] | (body[13] << 8);
      }
      continue;
    }
    if (t === 0x2c) {
      const w = b[p + 4] | (b[p + 5] << 8),
        h = b[p + 6] | (b[p + 7] << 8);
      const f = b[p + 8];
      p += 9;
      if (f & 0x80) p += 3 * (1 << ((f & 7) + 1));
      const min = b[p++];
      const data = subBlocks();
      frames.push({ w, h, delay, indices: lzwDecode(data, min, w * h) });
      continue;
    }
    throw new Error(`unexpected block 0x${t.toString(16)} at ${p - 1}`);
  }
  assert.equal(p, b.length, 'the trailer is the last byte');
  return { width, height, frames, loop };
}

function rgbaFrame(w, h, fn) {
  const a = new Uint8ClampedArray(w * h * 4);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const [r, g, bl] = fn(x, y);
      const i = (y * w + x) * 4;
      a[i] = r;
      a[i + 1] = g;
      a[i + 2] = bl;
      a[i + 3] = 255;
    }
  }
  return a;
}

test('palette has 256 colours including black and white', () => {
  assert.equal(PALETTE.length, 768);
  const cols = new Set();
  for (let i = 0; i < 256; i++) cols.add(`${PALETTE[i * 3]},${PALETTE[i * 3 + 1]},${PALETTE[i * 3 + 2]}`);
  assert.ok(cols.has('0,0,0') && cols.has('255,255,255'));
  assert.equal(cols.size, 256);
});

test('quantize maps pure colours to themselves', () => {
  const idx = quantize(Uint8Array.from([0, 0, 0, 255, 255, 255, 255, 255, 255, 0, 0, 255]));
  for (let k = 0; k < 3; k++) {
    const want = k === 0 ? [0, 0, 0] : k === 1 ? [255, 255, 255] : [255, 0, 0];
    assert.deepEqual([...PALETTE.slice(idx[k] * 3, idx[k] * 3 + 3)], want);
  }
});

test('LZW round trips short, repetitive and table-filling inputs', () => {
  const cases = [
    Uint8Array.from([7]),
    Uint8Array.from([1, 1, 1, 1, 1, 1, 1, 1, 1, 1]),
    Uint8Array.from({ length: 5000 }, (_, i) => i % 7),
  ];
  // Pseudo-random data forces the code table to fill and a clear code.
  let s = 12345;
  cases.push(
    Uint8Array.from({ length: 60000 }, () => {
      s = (s * 1103515245 + 12345) >>> 0;
      return s >>> 24;
    }),
  );
  for (const c of cases) assert.deepEqual(lzwDecode(lzwEncode(c, 8), 8, c.length), [...c]);
});

test('an animated GIF with several frames parses and decodes', () => {
  const w = 40,
    h = 30;
  const frames = [
    { rgba: rgbaFrame(w, h, () => [255, 0, 0]) },
    { rgba: rgbaFrame(w, h, (x) => (x < 20 ? [0, 0, 255] : [255, 255, 255])) },
    { rgba: rgbaFrame(w, h, (x, y) => [(x * 6) & 255, (y * 8) & 255, 128]), delayMs: 1000 },
  ];
  const gif = encodeGif(frames, { width: w, height: h, delayMs: 250 });
  const parsed = parseGif(gif);
  assert.equal(parsed.width, w);
  assert.equal(parsed.height, h);
  assert.equal(parsed.loop, 0);
  assert.equal(parsed.frames.length, 3);
  assert.deepEqual(
    parsed.frames.map((f) => f.delay),
    [25, 25, 100],
  );
  for (let i = 0; i < 3; i++) {
    assert.equal(parsed.frames[i].indices.length, w * h);
    assert.deepEqual(parsed.frames[i].indices, [...quantize(frames[i].rgba)]);
  }
  const red = parsed.frames[0].indices[0];
  assert.deepEqual([...PALETTE.slice(red * 3, red * 3 + 3)], [255, 0, 0]);
  assert.deepEqual(imageSize(bytesToBase64(gif)), { format: 'gif', width: w, height: h });
});

test('the encoder refuses bad input', () => {
  assert.throws(() => encodeGif([], { width: 2, height: 2 }), /no frames/);
  assert.throws(() => encodeGif([{ indices: new Uint8Array(3) }], { width: 2, height: 2 }), /pixels/);
  assert.throws(() => encodeGif([{ indices: new Uint8Array(0) }], { width: 0, height: 2 }), /size/);
});
