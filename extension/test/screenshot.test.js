// captureTab (sw/screenshot.js): what it asks the page and how it captures.
// chrome.debugger is a fake standing for a tab whose window, scrollbars,
// zoom and device pixel ratio each case sets; its captureScreenshot answers
// a PNG header of the size Chrome would give. TestScreenshot* in
// bridge/internal/e2e run the real thing in Chromium.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { installFakeChrome } from './fake-chrome.js';
import * as cdp from '../sw/cdp.js';
import { captureTab, captureFullResolution, getTabScale, imageSize } from '../sw/screenshot.js';

const TAB = 77;
let page; // the tab as the fake debugger describes it
let log; // [event, method] in the order things happened
let shots; // the params of each Page.captureScreenshot

/** Base64 of a PNG's first 33 bytes (signature and IHDR) saying width x height. */
function pngHeader(width, height) {
  const b = new Uint8Array(33);
  b.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]);
  new DataView(b.buffer).setUint32(16, width);
  new DataView(b.buffer).setUint32(20, height);
  return Buffer.from(b).toString('base64');
}

/** A 1280x757 window, no scrollbar, no zoom, devicePixelRatio 1. */
function plainPage() {
  return {
    innerWidth: 1280,
    innerHeight: 757,
    clientWidth: 1280,
    clientHeight: 757,
    dpr: 1,
    pinch: 1,
    scrollY: 0,
    evaluateFails: false,
    // What Chrome's capture without a clip gives: the window in device px.
    plainSize: null,
  };
}

function answer(method, params) {
  switch (method) {
    case 'Page.getLayoutMetrics': {
      const vv = {
        clientWidth: page.clientWidth / page.pinch,
        clientHeight: page.clientHeight / page.pinch,
        offsetX: 0,
        offsetY: 0,
        pageX: 0,
        pageY: page.scrollY,
        scale: page.pinch,
        zoom: 1,
      };
      return {
        cssVisualViewport: vv,
        cssLayoutViewport: { clientWidth: Math.floor(page.clientWidth), clientHeight: Math.floor(page.clientHeight) },
        cssContentSize: { x: 0, y: 0, width: page.clientWidth, height: 3000 },
      };
    }
    case 'Runtime.evaluate':
      if (page.evaluateFails) throw new Error('Execution context was destroyed.');
      return { result: { type: 'object', value: [page.dpr, page.innerWidth, page.innerHeight] } };
    case 'Page.captureScreenshot': {
      shots.push(params);
      if (!params.clip) {
        const s = page.plainSize || {
          width: Math.round(page.innerWidth * page.dpr),
          height: Math.round(page.innerHeight * page.dpr),
        };
        return { data: pngHeader(s.width, s.height) };
      }
      const k = params.clip.scale * page.dpr;
      return { data: pngHeader(Math.round(params.clip.width * k), Math.round(params.clip.height * k)) };
    }
    default:
      return {};
  }
}

beforeEach(() => {
  const fake = installFakeChrome();
  page = plainPage();
  log = [];
  shots = [];
  fake.debugger = {
    attach: async () => {},
    detach: async () => {},
    sendCommand: async (target, method, params) => {
      log.push(['asked', method]);
      await new Promise((r) => setTimeout(r, 1)); // the page answers later
      log.push(['answered', method]);
      return answer(method, params);
    },
    onEvent: { addListener() {} },
    onDetach: { addListener() {} },
  };
  globalThis.chrome = fake;
  cdp.forgetTab(TAB);
});

test('the metrics go to the page together, before the capture', async () => {
  await captureTab(TAB);
  const asked = log.filter(([e]) => e === 'asked').map(([, m]) => m);
  assert.deepEqual(asked.slice(-3), ['Page.getLayoutMetrics', 'Runtime.evaluate', 'Page.captureScreenshot']);
  const evaluateAsked = log.findIndex(([e, m]) => e === 'asked' && m === 'Runtime.evaluate');
  const metricsAnswered = log.findIndex(([e, m]) => e === 'answered' && m === 'Page.getLayoutMetrics');
  assert.ok(evaluateAsked < metricsAnswered, `asked one after the other: ${JSON.stringify(log)}`);
});

test('when the viewport is captured without a clip', async (t) => {
  const cases = [
    { name: 'the whole window at device resolution', set: {}, clip: false, size: [1280, 757] },
    {
      name: 'a vertical scrollbar: the viewport is narrower than the window',
      set: { clientWidth: 1265 },
      clip: true,
      size: [1265, 757],
    },
    {
      name: 'a horizontal scrollbar',
      set: { clientHeight: 742 },
      clip: true,
      size: [1280, 742],
    },
    {
      name: 'devicePixelRatio 2: scaled to the long edge',
      set: { dpr: 2 },
      clip: true,
      size: [1568, 927],
    },
    {
      name: 'devicePixelRatio 2 in a small window: device resolution fits',
      set: { innerWidth: 700, innerHeight: 500, clientWidth: 700, clientHeight: 500, dpr: 2 },
      clip: false,
      size: [1400, 1000],
    },
    { name: 'pinch zoom: the visual viewport is part of the window', set: { pinch: 2 }, clip: true, size: [640, 379] },
    {
      name: 'page zoom with a fractional viewport',
      set: { clientHeight: 605.6000366210938, innerWidth: 1024, innerHeight: 606, clientWidth: 1024, dpr: 1.25 },
      clip: true,
      size: [1280, 757],
    },
    {
      name: 'the window size unknown (evaluate failed)',
      set: { evaluateFails: true },
      clip: true,
      size: [1280, 757],
    },
    { name: 'scrolled down, whole window', set: { scrollY: 900 }, clip: false, size: [1280, 757] },
  ];
  for (const c of cases) {
    await t.test(c.name, async () => {
      page = { ...plainPage(), ...c.set };
      shots = [];
      const shot = await captureTab(TAB);
      assert.equal(shots.length, 1, `captures: ${JSON.stringify(shots)}`);
      assert.equal(!!shots[0].clip, c.clip, `params: ${JSON.stringify(shots[0])}`);
      assert.deepEqual([shot.width, shot.height], c.size);
      assert.equal(shot.scale, shot.width / shot.region.width);
      const scale = await getTabScale(TAB);
      assert.equal(scale.scale, shot.scale);
    });
  }
});

test('a region or the full page is always clipped', async () => {
  await captureTab(TAB, { region: [10, 10, 110, 60] });
  await captureTab(TAB, { fullPage: true });
  assert.equal(shots.length, 2);
  assert.ok(shots.every((p) => p.clip && p.captureBeyondViewport === true));
  assert.deepEqual(shots[0].clip, { x: 10, y: 10, width: 100, height: 50, scale: 4 });
});

test('a capture without a clip that is not the viewport is taken again with it', async () => {
  // The page grew a scrollbar (or said its window size itself) between the
  // questions and the capture: the image is not the viewport measured.
  page.plainSize = { width: 1280, height: 800 };
  const shot = await captureTab(TAB);
  assert.equal(shots.length, 2);
  assert.equal(shots[0].clip, undefined);
  assert.deepEqual(shots[1].clip, { x: 0, y: 0, width: 1280, height: 757, scale: 1 });
  assert.deepEqual([shot.width, shot.height], [1280, 757]);
});

test('formats other than PNG keep their quality without a clip', async () => {
  const shot = await captureTab(TAB, { format: 'webp', quality: 80 });
  assert.equal(shots.length, 1);
  assert.deepEqual(shots[0], { format: 'webp', quality: 80, fromSurface: true });
  assert.equal(shot.format, 'webp');
});

test('the full-resolution capture asks the page nothing when the PNG says its size', async () => {
  page.dpr = 2;
  const full = await captureFullResolution(TAB);
  assert.deepEqual([full.width, full.height], [2560, 1514]);
  const asked = log.filter(([e]) => e === 'asked').map(([, m]) => m);
  assert.ok(!asked.includes('Page.getLayoutMetrics') && !asked.includes('Runtime.evaluate'), asked.join(', '));
});

test('a JPEG whose frame header comes after long metadata still gives its size', () => {
  for (const appBytes of [10, 100, 5000, 60000]) {
    const app = new Uint8Array(4 + appBytes);
    app.set([0xff, 0xe1, ((appBytes + 2) >> 8) & 0xff, (appBytes + 2) & 0xff]);
    const jpeg = Buffer.concat([
      Buffer.from([0xff, 0xd8]),
      Buffer.from(app),
      Buffer.from([0xff, 0xc0, 0, 11, 8, 0x02, 0xf5, 0x05, 0x00, 3, 0, 0, 0, 0]),
      Buffer.alloc(2000),
    ]);
    assert.deepEqual(
      imageSize(jpeg.toString('base64')),
      { format: 'jpeg', width: 1280, height: 757 },
      `APP1 of ${appBytes} bytes`,
    );
  }
  // Past the 64 KB looked at, as before.
  const far = Buffer.concat([Buffer.from([0xff, 0xd8]), Buffer.alloc(70000)]);
  assert.equal(imageSize(far.toString('base64')), null);
});

test("an image that sets no scale (a GIF frame) leaves the last screenshot's scale for the next click", async () => {
  await captureTab(TAB); // the model's screenshot, 1280 wide
  const before = await getTabScale(TAB);
  await captureTab(TAB, { format: 'jpeg', quality: 80, maxEdge: 640, budget: 0, setsScale: false });
  assert.deepEqual(await getTabScale(TAB), before);
  await captureTab(TAB, { maxEdge: 640 });
  assert.equal((await getTabScale(TAB)).scale, 0.5, "a screenshot of the model's still sets it");
});
