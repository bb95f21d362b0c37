package codes

// IsReserved reports whether code collides with a route or well-known file
// served at the root, which a short code must never shadow. Matching is
// ASCII case-insensitive: routers and browsers treat these names
// case-insensitively often enough that "API" must be refused too, and
// limiting folding to ASCII keeps the answer independent of Unicode table
// versions.
func IsReserved(code string) bool {
	switch asciiLower(code) {
	case "api", "admin", "health", "metrics", "ui", "stats", "shorten",
		"static", "favicon.ico", "robots.txt":
		return true
	}
	return false
}

// asciiLower lowercases A–Z only. Unicode case mapping changes between
// Unicode versions, and canonical forms must not change when Go does.
func asciiLower(s string) string {
	i := 0
	for i < len(s) && !isASCIIUpper(s[i]) {
		i++
	}
	if i == len(s) {
		return s
	}
	b := []byte(s)
	for ; i < len(b); i++ {
		if isASCIIUpper(b[i]) {
			b[i] += 'a' - 'A'
		}
	}
	return string(b)
}

func isASCIIUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
