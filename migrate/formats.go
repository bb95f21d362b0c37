package migrate

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// codeFromShortURL is the code of a short URL: its path without the
// leading slash ("https://sho.rt/abc" and "sho.rt/abc" give "abc").
func codeFromShortURL(s string) string {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.Path, "/")
}

// parseTime reads the time layouts the formats use. Times without a zone
// are taken as UTC: YOURLS and Kutt on SQLite store UTC.
func parseTime(field, s string) (*time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05-0700", "2006-01-02 15:04:05", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return &t, nil
		}
	}
	return nil, fmt.Errorf("%s %q is not a time", field, s)
}

func parseYOURLS(data []byte) ([]Link, []Problem, error) {
	var links []Link
	var problems []Problem
	err := eachJSONItem(data, "links", func(line int, raw json.RawMessage) {
		var r struct {
			ShortURL  string  `json:"shorturl"`
			URL       string  `json:"url"`
			Title     string  `json:"title"`
			Timestamp string  `json:"timestamp"`
			Clicks    flexInt `json:"clicks"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			problems = append(problems, Problem{line, "not a YOURLS link: " + err.Error()})
			return
		}
		l := Link{Line: line, Code: codeFromShortURL(r.ShortURL), URL: r.URL, Title: r.Title, Clicks: int64(r.Clicks)}
		var err error
		if l.CreatedAt, err = parseTime("timestamp", r.Timestamp); err != nil {
			problems = append(problems, Problem{line, err.Error()})
			return
		}
		links = append(links, l)
	})
	return links, problems, err
}

func parseKutt(data []byte) ([]Link, []Problem, error) {
	var links []Link
	var problems []Problem
	err := eachJSONItem(data, "data", func(line int, raw json.RawMessage) {
		var r struct {
			Address     string  `json:"address"`
			Target      string  `json:"target"`
			Description string  `json:"description"`
			CreatedAt   string  `json:"created_at"`
			ExpireIn    *string `json:"expire_in"`
			VisitCount  flexInt `json:"visit_count"`
			// Kutt's API says only whether a link has a password, never
			// the password; a banned link is one Kutt's admins disabled.
			Password bool `json:"password"`
			Banned   bool `json:"banned"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			problems = append(problems, Problem{line, "not a Kutt link: " + err.Error()})
			return
		}
		// Imported, either would redirect anyone: what Kutt kept closed
		// stays out, and the report says why.
		switch {
		case r.Banned:
			problems = append(problems, Problem{line, "banned in Kutt: not imported"})
			return
		case r.Password:
			problems = append(problems, Problem{line, "password-protected in Kutt, whose export has no password: not imported (create it again with a password)"})
			return
		}
		l := Link{Line: line, Code: r.Address, URL: r.Target, Title: r.Description, Clicks: int64(r.VisitCount)}
		var err error
		if l.CreatedAt, err = parseTime("created_at", r.CreatedAt); err == nil && r.ExpireIn != nil {
			l.ExpiresAt, err = parseTime("expire_in", *r.ExpireIn)
		}
		if err != nil {
			problems = append(problems, Problem{line, err.Error()})
			return
		}
		links = append(links, l)
	})
	return links, problems, err
}

func parseBitly(data []byte) ([]Link, []Problem, error) {
	var links []Link
	var problems []Problem
	err := eachJSONItem(data, "links", func(line int, raw json.RawMessage) {
		var r struct {
			Link      string   `json:"link"`
			ID        string   `json:"id"` // "bit.ly/abc", when link is missing
			LongURL   string   `json:"long_url"`
			Title     string   `json:"title"`
			CreatedAt string   `json:"created_at"`
			Tags      []string `json:"tags"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			problems = append(problems, Problem{line, "not a Bitly link: " + err.Error()})
			return
		}
		short := r.Link
		if short == "" {
			short = r.ID
		}
		l := Link{Line: line, Code: codeFromShortURL(short), URL: r.LongURL, Title: r.Title, Tags: r.Tags}
		var err error
		if l.CreatedAt, err = parseTime("created_at", r.CreatedAt); err != nil {
			problems = append(problems, Problem{line, err.Error()})
			return
		}
		links = append(links, l)
	})
	return links, problems, err
}

// csvRows reads a CSV with a header and calls fn with each row as a map
// from normalised column name (lower case, no spaces or underscores) to
// value, and the row's line.
// required are the columns the format cannot do without; any one of a
// group separated by "|" will do.
func csvRows(data []byte, required []string, fn func(line int, row map[string]string) error) ([]Problem, error) {
	r := csv.NewReader(strings.NewReader(string(data)))
	r.FieldsPerRecord = -1 // a short row is reported by the columns it lacks
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("read the CSV header: %w", err)
	}
	names := make([]string, len(header))
	for i, h := range header {
		names[i] = strings.NewReplacer(" ", "", "_", "", "-", "").Replace(strings.ToLower(strings.TrimSpace(h)))
	}
	for _, want := range required {
		if !slices.ContainsFunc(strings.Split(want, "|"), func(w string) bool { return slices.Contains(names, w) }) {
			return nil, fmt.Errorf("the CSV header has no %s column (it has: %s)", strings.ReplaceAll(want, "|", " or "), strings.Join(header, ", "))
		}
	}
	var problems []Problem
	for {
		rec, err := r.Read()
		if errors.Is(err, csv.ErrFieldCount) {
			err = nil
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return problems, nil
			}
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				// The rest of the file cannot be read reliably.
				problems = append(problems, Problem{pe.StartLine, "bad CSV: " + pe.Err.Error() + "; the rest of the file was not read"})
				return problems, nil
			}
			return problems, fmt.Errorf("read the CSV: %w", err)
		}
		line, _ := r.FieldPos(0)
		row := map[string]string{}
		for i, v := range rec {
			if i < len(names) {
				row[names[i]] = v
			}
		}
		if err := fn(line, row); err != nil {
			problems = append(problems, Problem{line, err.Error()})
		}
	}
}

func parseShlink(data []byte) ([]Link, []Problem, error) {
	var links []Link
	problems, err := csvRows(data, []string{"longurl", "shortcode|shorturl"}, func(line int, row map[string]string) error {
		l := Link{Line: line, Code: row["shortcode"], URL: row["longurl"], Title: row["title"], Tags: splitTags(row["tags"], "|")}
		if _, ok := row["shortcode"]; !ok {
			// The first 3.x web clients wrote no shortCode column and
			// joined tags with ",".
			l.Code, l.Tags = codeFromShortURL(row["shorturl"]), splitTags(row["tags"], ",")
		}
		var err error
		if l.CreatedAt, err = parseTime("createdAt", row["createdat"]); err != nil {
			return err
		}
		if l.Clicks, err = count("visits", row["visits"]); err != nil {
			return err
		}
		links = append(links, l)
		return nil
	})
	return links, problems, err
}

func parseCSV(data []byte) ([]Link, []Problem, error) {
	var links []Link
	problems, err := csvRows(data, []string{"shortcode", "originalurl"}, func(line int, row map[string]string) error {
		l := Link{Line: line, Code: row["shortcode"], URL: row["originalurl"], Workspace: strings.TrimSpace(row["workspace"]),
			Title: row["title"], Tags: splitTags(row["tags"], "|")}
		var err error
		if l.ExpiresAt, err = parseTime("expires_at", row["expiresat"]); err != nil {
			return err
		}
		if l.CreatedAt, err = parseTime("created_at", row["createdat"]); err != nil {
			return err
		}
		if l.Clicks, err = count("clicks", row["clicks"]); err != nil {
			return err
		}
		links = append(links, l)
		return nil
	})
	return links, problems, err
}

func count(field, s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q is not a count", field, s)
	}
	return n, nil
}
