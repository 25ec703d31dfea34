// SSRF checks (spec 002): every refused range and name, developer mode's
// loopback exception, and names that resolve to private addresses.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkUrl, checkResolved, classifyAddress, parseIPv6 } from '../remote/ssrf.js';
import { RemoteError } from '../remote/errors.js';

function refused(url, opts) {
  try {
    checkUrl(url, opts);
  } catch (err) {
    assert.ok(err instanceof RemoteError, `${url}: a RemoteError`);
    assert.equal(err.category, 'ssrf', url);
    return err.message;
  }
  return null;
}

test('refused addresses and names, with the reason in the sentence', () => {
  const cases = [
    // [url, reason pattern]
    ['https://10.0.0.1/mcp', /private network address \(10\.0\.0\.0\/8\)/],
    ['https://10.255.255.255/', /10\.0\.0\.0\/8/],
    ['https://172.16.0.1/', /172\.16\.0\.0\/12/],
    ['https://172.31.255.254/', /172\.16\.0\.0\/12/],
    ['https://192.168.1.10/', /192\.168\.0\.0\/16/],
    ['https://127.0.0.1/', /loopback/],
    ['https://127.8.9.10/', /loopback/],
    ['https://169.254.1.1/', /link-local address \(169\.254\.0\.0\/16\)/],
    ['https://169.254.169.254/latest/meta-data/', /cloud metadata address 169\.254\.169\.254/],
    ['https://0.0.0.0/', /0\.0\.0\.0\/8/],
    ['https://100.100.100.200/', /carrier-grade NAT/],
    ['https://224.0.0.1/', /multicast/],
    ['https://[::1]/', /loopback/],
    ['https://[::]/', /unspecified/],
    ['https://[fc00::1]/', /unique local address \(fc00::\/7\)/],
    ['https://[fd12:3456:789a::1]/', /fc00::\/7/],
    ['https://[fe80::1]/', /link-local address \(fe80::\/10\)/],
    ['https://[febf:ffff::1]/', /fe80::\/10/],
    ['https://[::ffff:127.0.0.1]/', /loopback/],
    ['https://[::ffff:10.1.2.3]/', /10\.0\.0\.0\/8/],
    ['https://[::ffff:169.254.169.254]/', /169\.254\.169\.254/],
    ['https://[::ffff:c0a8:0101]/', /192\.168\.0\.0\/16/],
    ['https://[64:ff9b::a9fe:a9fe]/', /169\.254\.169\.254/],
    ['https://[2002:0a00:0001::1]/', /10\.0\.0\.0\/8/],
    ['https://[fd00:ec2::254]/', /metadata/],
    // IPv4 written the other ways URL parsers accept
    ['https://2130706433/', /loopback/],
    ['https://0x7f.1/', /loopback/],
    ['https://0177.0.0.1/', /loopback/],
    ['https://127.1/', /loopback/],
    // names
    ['https://localhost/', /loopback/],
    ['https://app.localhost/', /loopback/],
    ['https://metadata.google.internal/computeMetadata/v1/', /cloud metadata service/],
    ['https://metadata.google.internal./', /cloud metadata service/],
    ['https://METADATA.GOOGLE.INTERNAL/', /cloud metadata service/],
    ['https://metadata/', /cloud metadata service/],
    ['https://metadata.goog/', /cloud metadata service/],
    ['https://intranet/', /no dot in the host name/],
    ['https://printer.local/', /private network name/],
    ['https://db.corp.internal/', /private network name/],
    // schemes and credentials
    ['http://example.com/mcp', /it is not https/],
    ['javascript:alert(1)', /only https URLs are allowed, not javascript:/],
    ['file:///etc/passwd', /only https URLs are allowed, not file:/],
    ['data:text/html,hi', /only https URLs are allowed, not data:/],
    ['ftp://example.com/', /only https URLs are allowed, not ftp:/],
    ['https://user:pass@example.com/', /user name or password/],
    ['not a url', /it is not a URL/],
    ['open -a Calculator', /it is not a URL/],
  ];
  for (const [url, reason] of cases) {
    const msg = refused(url);
    assert.ok(msg, `${url} should be refused`);
    assert.match(msg, reason, url);
    assert.match(msg, /^Refused /, url);
  }
});

test('public addresses and names pass, and the URL comes back parsed', () => {
  const cases = [
    'https://mcp.notion.com/mcp',
    'https://example.com:8443/sse?x=1',
    'https://93.184.216.34/',
    'https://172.15.255.255/', // just below 172.16/12
    'https://172.32.0.1/', // just above
    'https://192.169.0.1/',
    'https://169.253.255.255/',
    'https://100.63.255.255/',
    'https://[2606:4700:4700::1111]/',
    'https://[2001:db8::1]/',
  ];
  for (const url of cases) {
    assert.equal(refused(url), null, url);
    assert.ok(checkUrl(url) instanceof URL, url);
  }
});

test('developer mode allows loopback over http and https, nothing else', () => {
  const dev = { developerMode: true };
  for (const url of [
    'http://localhost:3000/mcp',
    'http://127.0.0.1:8080/',
    'http://[::1]:9/',
    'https://localhost/',
    'http://[::ffff:127.0.0.1]/',
  ]) {
    assert.equal(refused(url, dev), null, url);
  }
  const still = [
    ['http://example.com/', /not https/],
    ['http://10.0.0.1/', /not https/],
    ['https://192.168.0.1/', /192\.168/],
    ['https://169.254.169.254/', /metadata/],
    ['https://metadata.google.internal/', /metadata/],
    ['javascript:alert(1)', /javascript:/],
  ];
  for (const [url, reason] of still) assert.match(refused(url, dev) || '', reason, url);
  assert.match(refused('http://localhost/') || '', /only allowed for loopback addresses in developer mode/);
});

test('the purpose names the URL in the sentence', () => {
  assert.match(
    refused('http://auth.example.com/authorize', { purpose: 'authorization' }),
    /^Refused the authorization endpoint http:\/\/auth\.example\.com\/authorize: it is not https\.$/,
  );
  assert.match(refused('https://10.0.0.1/token', { purpose: 'token' }), /^Refused the token endpoint/);
});

test('checkResolved refuses a name that resolves to a private address', async () => {
  const resolving = (addrs) => ({ resolve: async () => addrs });
  const cases = [
    ['private v4', ['10.1.2.3'], /resolves to 10\.1\.2\.3, which is a private network address/],
    ['metadata v4', ['169.254.169.254'], /cloud metadata/],
    ['one bad among good', ['93.184.216.34', '192.168.0.7'], /192\.168\.0\.7/],
    ['loopback v6', ['::1'], /loopback/],
    ['mapped loopback', ['::ffff:127.0.0.1'], /loopback/],
    ['unique local', ['fd00::5'], /fc00::\/7/],
    ['public', ['93.184.216.34', '2606:2800:220:1::'], null],
  ];
  for (const [name, addrs, want] of cases) {
    let err = null;
    let got;
    try {
      got = await checkResolved('https://rebind.example.com/mcp', resolving(addrs));
    } catch (e) {
      err = e;
    }
    if (want) {
      assert.equal(err?.category, 'ssrf', name);
      assert.match(err.message, want, name);
    } else {
      assert.equal(err, null, name);
      assert.deepEqual(got, { checked: true, addresses: addrs }, name);
    }
  }
});

test('checkResolved: loopback in developer mode, IP literals, no resolver, failed lookup', async () => {
  assert.equal(
    (await checkResolved('http://localhost:1/', { developerMode: true, resolve: async () => ['127.0.0.1', '::1'] }))
      .checked,
    true,
  );
  assert.deepEqual(await checkResolved('https://93.184.216.34/', {}), { checked: true, addresses: ['93.184.216.34'] });
  const skipped = await checkResolved('https://example.com/', {});
  assert.equal(skipped.checked, false);
  assert.match(skipped.note, /were not checked: this platform cannot resolve host names/);
  await assert.rejects(
    checkResolved('https://nx.example.com/', {
      resolve: async () => {
        throw new Error('ENOTFOUND');
      },
    }),
    (e) => e.category === 'network' && /Could not look up nx\.example\.com/.test(e.message),
  );
});

test('address classification at range edges and IPv6 parsing', () => {
  const cases = [
    ['172.16.0.0', true],
    ['172.31.255.255', true],
    ['172.32.0.0', false],
    ['172.15.255.255', false],
    ['169.254.0.0', true],
    ['169.255.0.0', false],
    ['126.255.255.255', false],
    ['128.0.0.0', false],
    ['fbff::1', false],
    ['fc00::', true],
    ['fdff:ffff::', true],
    ['fe7f::1', false],
    ['fe80::', true],
    ['2001:db8::', false],
    ['::ffff:8.8.8.8', false],
  ];
  for (const [addr, blocked] of cases) assert.equal(!!classifyAddress(addr), blocked, addr);
  assert.deepEqual(parseIPv6('::1'), [...new Array(15).fill(0), 1]);
  assert.deepEqual(parseIPv6('::ffff:1.2.3.4').slice(10), [0xff, 0xff, 1, 2, 3, 4]);
  for (const bad of ['1:2:3:4:5:6:7:8:9', ':::', '1::2::3', 'g::1', '1.2.3.4', '::1.2.3']) {
    assert.equal(parseIPv6(bad), null, bad);
  }
});
