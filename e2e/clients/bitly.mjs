// Drives linkraft with Bitly's npm client (bitly), unchanged: writes through
// one node (WRITE_HOST), reads through another (READ_HOST), both serving
// HTTPS on port 443, the only port the client calls (its apiUrl is a host
// name); short URLs are https://SHORT_HOST/<code>. The client sends the key bare in Authorization and domain bit.ly
// in every body, and turns every id it is given into bit.ly/<hash>. Run by
// e2e/compat_bitly_test.go; exits non-zero with the first broken
// expectation.
import assert from 'node:assert/strict';
import bitly from 'bitly';

const { BitlyClient } = bitly;
const { WRITE_HOST, READ_HOST, SHORT_HOST, API_KEY } = process.env;
const w = new BitlyClient(API_KEY, { apiUrl: WRITE_HOST });
const r = new BitlyClient(API_KEY, { apiUrl: READ_HOST });

// rejects runs call and returns what the client rejected it with: Bitly's
// error body.
async function rejects(call) {
  try {
    await call();
  } catch (err) {
    return err;
  }
  assert.fail('the call succeeded');
}

const hashOf = (id) => id.split('/').pop();

const target = 'https://example.com/bitly-client';
const link = await w.shorten(target);
assert.equal(link.long_url, target);
assert.ok(link.link.startsWith(`https://${SHORT_HOST}/`), link.link);
assert.equal(link.id, `${SHORT_HOST}/${hashOf(link.link)}`);
assert.match(link.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+0000$/);
assert.deepEqual(link.tags, []);
assert.equal(link.archived, false);
const hash = hashOf(link.id);
// Shortened again: the same bitlink, as Bitly answers.
assert.equal((await w.shorten(target)).id, link.id);
// The token with "Bearer", as Bitly's documentation sends it.
assert.equal((await new BitlyClient(`Bearer ${API_KEY}`, { apiUrl: WRITE_HOST }).shorten(target)).id, link.id);

// Read after write, on another node: by short URL, by id, by hash.
for (const item of [link.link, link.id, `bit.ly/${hash}`]) {
  const expanded = await r.expand(item);
  assert.equal(expanded.long_url, target, item);
  assert.equal(expanded.id, link.id);
}
const read = await r.getBitlink(link.id);
assert.equal(read.long_url, target);
assert.equal(read.link, link.link);
assert.equal(read.id, link.id);

// Create with a title and tags; update through the client's own request
// (it sends domain bit.ly along), and read the update on another node.
const made = await w.bitlyRequest('bitlinks', { long_url: 'https://example.com/bitly-made', title: 'Made', tags: ['x'] });
assert.equal(made.title, 'Made');
assert.deepEqual(made.tags, ['x']);
const updated = await w.bitlyRequest(`bitlinks/${made.id}`, { title: 'Renamed', tags: ['x', 'y'] }, 'PATCH');
assert.equal(updated.title, 'Renamed');
assert.deepEqual((await r.getBitlink(made.id)).tags, ['x', 'y']);
assert.equal((await r.info(made.id)).title, 'Renamed');

// One click with a referrer, counted once the node that took it has
// flushed its clicks to the cluster: ask the reading node until it has.
const visit = await fetch(link.link, { redirect: 'manual', headers: { Referer: 'https://news.example/story' } });
assert.equal(visit.status, 302);
assert.equal(visit.headers.get('location'), target);
let summary;
let referrers;
for (let i = 0; i < 300; i++) {
  summary = await r.bitlyRequest(`bitlinks/bit.ly/${hash}/clicks/summary`, { unit: 'day', units: -1 }, 'GET');
  referrers = await r.referrers(link.id);
  if (summary.total_clicks > 0 && referrers.metrics.length > 0) break;
  await new Promise((resolve) => setTimeout(resolve, 100));
}
assert.equal(summary.total_clicks, 1);
assert.equal(summary.unit, 'day');
assert.deepEqual(referrers.metrics, [{ value: 'news.example', clicks: 1 }]);
assert.equal(referrers.facet, 'referrers');
const countries = await r.countries(link.id);
assert.equal(countries.facet, 'countries');
assert.equal(countries.metrics.reduce((n, m) => n + m.clicks, 0), 1);
const days = await r.clicks(link.id); // unit day, units -1, size 50
assert.equal(days.unit, 'day');
assert.equal(days.link_clicks.reduce((n, c) => n + c.clicks, 0), 1);
assert.equal(days.link_clicks[0].clicks, 1); // newest first: today
const hours = await r.clicks(link.id, 'hour', 24);
assert.equal(hours.link_clicks.length, 24);
assert.equal(hours.link_clicks.reduce((n, c) => n + c.clicks, 0), 1);

// Errors, in Bitly's shape.
const missing = await rejects(() => r.expand('bit.ly/nosuchlink'));
assert.equal(missing.message, 'NOT_FOUND');
assert.equal(missing.resource, 'bitlinks');
assert.ok(missing.description);
assert.ok(Array.isArray(missing.errors));
const forbidden = await rejects(() => new BitlyClient('lk_not_a_key', { apiUrl: READ_HOST }).shorten(target));
assert.equal(forbidden.message, 'FORBIDDEN');
const badURL = await rejects(() => w.shorten('ftp://example.com/x'));
assert.equal(badURL.message, 'INVALID_ARG_LONG_URL');
assert.equal(badURL.errors[0].field, 'long_url');
const minutes = await rejects(() => r.clicksByMinute(link.id));
assert.equal(minutes.message, 'INVALID_ARG_UNIT');
const cities = await rejects(() => r.bitlyRequest(`bitlinks/${link.id}/cities`, {}, 'GET'));
assert.equal(cities.message, 'NOT_IMPLEMENTED');

// The token's user and groups: the key and its workspace.
const user = await r.bitlyRequest('user', {}, 'GET');
assert.equal(user.default_group_guid, 'team');
const { groups } = await r.bitlyRequest('groups', {}, 'GET');
assert.deepEqual(groups.map((g) => g.guid), ['team']);

// The group's bitlinks, a page at a time, read on another node.
const first = await r.bitlyRequest('groups/team/bitlinks', { size: 1 }, 'GET');
assert.equal(first.links.length, 1);
assert.equal(first.pagination.size, 1);
assert.ok(first.pagination.next, 'a next page');
const tagged = await r.bitlyRequest('groups/team/bitlinks', { tags: 'y' }, 'GET');
assert.deepEqual(tagged.links.map((l) => l.id), [made.id]);

// Delete, as Bitly's current API does.
const doomed = await w.shorten('https://example.com/bitly-doomed');
const deleted = await w.bitlyRequest(`bitlinks/${doomed.id}`, {}, 'DELETE');
assert.deepEqual(deleted.links_deleted, [{ id: doomed.id }]);
assert.equal((await rejects(() => r.getBitlink(doomed.id))).message, 'NOT_FOUND');

const kept = await w.shorten('https://example.com/bitly-kept');
console.log(JSON.stringify({ kept: hashOf(kept.id), renamed: hashOf(made.id) }));
