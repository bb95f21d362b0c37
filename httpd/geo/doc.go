// Package geo owns the mapping from a client's IP address to its country,
// an ISO 3166-1 alpha-2 code, for the visit statistics. It holds the table
// it answers from, embedded in the binary, so lookups need no files, no
// network and no configuration; it is pure and holds no mutable state.
//
// # Data
//
// The table is made from the geo-whois-asn-country database of the
// ip-location-db project (https://github.com/sapics/ip-location-db), as
// published on npm as @ip-location-db/geo-whois-asn-country. It merges
// providers' geofeeds, the five regional registries' WHOIS data and their
// ASN-to-country data, in that order of precedence.
//
// Licence: the npm package declares CC0-1.0, but its README and its
// NRO_LICENSE file say the registry data it is built from is licensed under
// Creative Commons Attribution 4.0 by the Number Resource Organization,
// which asks for attribution. linkraft therefore treats the table as
// CC BY 4.0 and gives it here: IP-to-country data © Number Resource
// Organization (https://www.nro.net/), CC BY 4.0, via ip-location-db.
// Whoever distributes linkraft keeps this attribution.
//
// The embedded table, table.bin.gz, was generated from npm version
// 2.3.2026061719, whose data is dated 2026-06-17. It holds 341,597 IPv4 and
// 275,357 IPv6 ranges over 251 country codes; the file is 603,257 bytes and
// the loaded Table about 6.4 MB (5 bytes per IPv4 range, 17 per IPv6 range).
// Codes are the source's: they include XK for Kosovo and the retired AN.
//
// While making the table, internal/gen drops special-purpose addresses
// (private, loopback, shared, link-local, documentation, benchmarking,
// multicast, reserved; for IPv6 everything outside 2000::/3 and the IETF,
// 6to4 and documentation blocks inside it) even where the source names a
// country for them, as it does for 172.16.0.0/12 and 192.168.0.0/16. Where
// source rows overlap, the narrowest row wins: the source lists a registry
// block and then a provider's more specific rows inside it.
//
// The npm package's README warns that npm updates are deprecated and that
// corrected data is published in the project's GitHub releases. The
// generator also reads CSVs given as files, so a refresh from there works
// as long as their rows keep the start,end,country layout.
//
// # Refreshing
//
// From httpd/geo, with npm on the PATH:
//
//	go generate .
//
// or, with CSVs downloaded by other means:
//
//	go run ./internal/gen -v4 geo-whois-asn-country-ipv4.csv \
//		-v6 geo-whois-asn-country-ipv6.csv -version VERSION -date YYYY-MM-DD
//
// then update the version, date, counts and sizes above, check that the
// addresses pinned in geo_test.go still hold (their countries can change),
// and commit table.bin.gz. Builds and CI never run the generator.
package geo
