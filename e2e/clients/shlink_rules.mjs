// Drives linkraft's Shlink redirect rules, tag renames and deletions,
// domain redirects and crawlable links with Shlink's own SDK
// (@shlinkio/shlink-js-sdk), unchanged: writes through one node
// (WRITE_URL), reads through another (READ_URL). API_KEY may change the
// links of workspace team, ADMIN_KEY sets domains; DEFAULT_DOMAIN is the
// host of the default domain's short URLs. Run by e2e/compat_test.go;
// exits non-zero with the first broken expectation.
import assert from 'node:assert/strict';
import { ShlinkApiClient } from '@shlinkio/shlink-js-sdk';
import { NodeHttpClient } from '@shlinkio/shlink-js-sdk/node';

const { WRITE_URL, READ_URL, API_KEY, ADMIN_KEY, DEFAULT_DOMAIN, SLUG } = process.env;
const http = new NodeHttpClient();
const client = (baseUrl, apiKey = API_KEY) => new ShlinkApiClient(http, { baseUrl, apiKey });
const w = client(WRITE_URL);
const r = client(READ_URL);

// step names the part running, so a failure says where it was.
const step = (name) => console.error('step:', name);

async function rejects(call) {
  try {
    await call();
  } catch (problem) {
    return problem;
  }
  assert.fail('the call succeeded');
}

// Crawlable links.
step('Crawlable links');
const crawlable = await w.createShortUrl({ longUrl: 'https://example.com/crawl', customSlug: SLUG + '-crawl', crawlable: true, tags: ['rules-a'] });
assert.equal(crawlable.crawlable, true);
assert.equal((await r.getShortUrl({ shortCode: crawlable.shortCode })).crawlable, true);

// Redirect rules, set through one node and read through another.
step('Redirect rules');
const link = await w.createShortUrl({ longUrl: 'https://example.com/rules', customSlug: SLUG, tags: ['rules-a', 'rules-b'] });
const rules = [
  { longUrl: 'https://example.com/android', conditions: [{ type: 'device', matchKey: null, matchValue: 'android' }] },
  {
    longUrl: 'https://example.com/office',
    conditions: [
      { type: 'ip-address', matchKey: null, matchValue: '192.168.1.*' },
      { type: 'browser', matchKey: null, matchValue: 'firefox' },
    ],
  },
  {
    longUrl: 'https://example.com/campaign',
    conditions: [
      { type: 'query-param', matchKey: 'utm', matchValue: 'mail' },
      { type: 'language', matchKey: null, matchValue: 'es' },
    ],
  },
  { longUrl: 'https://example.co.uk/', conditions: [{ type: 'geolocation-country-code', matchKey: null, matchValue: 'GB' }] },
];
const set = await w.setShortUrlRedirectRules({ shortCode: SLUG }, { redirectRules: rules });
assert.equal(set.defaultLongUrl, 'https://example.com/rules');
const got = await r.getShortUrlRedirectRules({ shortCode: SLUG });
assert.equal(got.defaultLongUrl, 'https://example.com/rules');
assert.deepEqual(got.redirectRules.map((x) => x.priority), [1, 2, 3, 4]);
assert.deepEqual(got.redirectRules.map((x) => x.longUrl), rules.map((x) => x.longUrl));
const sorted = (conds) => [...conds].sort((a, b) => a.type.localeCompare(b.type));
got.redirectRules.forEach((x, i) => assert.deepEqual(sorted(x.conditions), sorted(rules[i].conditions)));
assert.equal((await r.getShortUrl({ shortCode: SLUG })).hasRedirectRules, true);
// A condition linkraft cannot honour is refused, naming it; nothing changes.
const city = await rejects(() => w.setShortUrlRedirectRules({ shortCode: SLUG }, {
  redirectRules: [{ longUrl: 'https://example.com/x', conditions: [{ type: 'geolocation-city-name', matchKey: null, matchValue: 'Paris' }] }],
}));
assert.equal(city.type, 'https://shlink.io/api/error/invalid-data');
assert.match(city.detail, /geolocation-city-name/);
assert.equal((await r.getShortUrlRedirectRules({ shortCode: SLUG })).redirectRules.length, 4);

// Tags: rename, conflict, not found, delete.
step('Tags');
await w.editTag({ oldName: 'rules-b', newName: 'rules-c' });
assert.deepEqual([...(await r.getShortUrl({ shortCode: SLUG })).tags].sort(), ['rules-a', 'rules-c']);
const conflict = await rejects(() => w.editTag({ oldName: 'rules-a', newName: 'rules-c' }));
assert.equal(conflict.type, 'https://shlink.io/api/error/tag-conflict');
assert.equal(conflict.status, 409);
const notFound = await rejects(() => w.editTag({ oldName: 'no-such-tag', newName: 'x' }));
assert.equal(notFound.type, 'https://shlink.io/api/error/tag-not-found');
assert.equal(notFound.status, 404);
await w.deleteTags(['rules-a', 'no-such-tag']);
assert.deepEqual((await r.getShortUrl({ shortCode: SLUG })).tags, ['rules-c']);
assert.deepEqual((await r.getShortUrl({ shortCode: crawlable.shortCode })).tags, []);
assert.ok(!(await r.listTags()).data.includes('rules-a'));

// Domain redirects: an admin key sets them; another key may not.
step('Domain redirects');
const admin = client(WRITE_URL, ADMIN_KEY);
const denied = await rejects(() => w.editDomainRedirects({ domain: 'links.example', baseUrlRedirect: 'https://example.com/' }));
assert.equal(denied.status, 403);
const branded = await admin.editDomainRedirects({
  domain: 'links.example', baseUrlRedirect: 'https://example.com/home',
  regular404Redirect: 'https://example.com/404', invalidShortUrlRedirect: 'https://example.com/invalid',
});
assert.deepEqual(branded, {
  baseUrlRedirect: 'https://example.com/home', regular404Redirect: 'https://example.com/404', invalidShortUrlRedirect: 'https://example.com/invalid',
});
// What a PATCH leaves out is kept; null removes it.
const patched = await admin.editDomainRedirects({ domain: 'links.example', regular404Redirect: null });
assert.deepEqual(patched, { baseUrlRedirect: 'https://example.com/home', regular404Redirect: null, invalidShortUrlRedirect: 'https://example.com/invalid' });
const defaults = await admin.editDomainRedirects({ domain: DEFAULT_DOMAIN, invalidShortUrlRedirect: 'https://example.com/default-invalid' });
assert.equal(defaults.invalidShortUrlRedirect, 'https://example.com/default-invalid');
const domains = await client(READ_URL, ADMIN_KEY).listDomains();
const byName = Object.fromEntries(domains.data.map((d) => [d.domain, d]));
assert.deepEqual(byName['links.example'].redirects, patched);
// The default domain is named by the Host each node was reached at.
assert.equal(domains.data.find((d) => d.isDefault).redirects.invalidShortUrlRedirect, 'https://example.com/default-invalid');
assert.equal(domains.defaultRedirects.invalidShortUrlRedirect, 'https://example.com/default-invalid');

console.log(JSON.stringify({ rules: SLUG, crawlable: crawlable.shortCode }));
