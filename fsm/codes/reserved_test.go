package codes

import "testing"

func TestIsReserved(t *testing.T) {
	tests := []struct {
		code string
		want bool
	}{
		{"api", true},
		{"API", true},
		{"Api", true},
		{"admin", true},
		{"AdMiN", true},
		{"health", true},
		{"metrics", true},
		{"METRICS", true},
		{"ui", true},
		{"uI", true},
		{"stats", true},
		{"shorten", true},
		{"static", true},
		{"favicon.ico", true},
		{"FAVICON.ICO", true},
		{"robots.txt", true},
		{"Robots.Txt", true},

		{"", false},
		{"apis", false},
		{"ap", false},
		{" api", false},
		{"api/", false},
		{"favicon", false},
		{"robots", false},
		{"Xk3p9Qa", false},
		// Only ASCII folds: U+017F LATIN SMALL LETTER LONG S folds to 's'
		// under Unicode rules, which would make the answer depend on the
		// Unicode version.
		{"\u017ftats", false},
	}
	for _, tt := range tests {
		if got := IsReserved(tt.code); got != tt.want {
			t.Errorf("IsReserved(%q) = %v, want %v", tt.code, got, tt.want)
		}
	}
}
