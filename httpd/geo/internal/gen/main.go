// Command gen owns the making of package geo's embedded table: it reads the
// ip-location-db geo-whois-asn-country CSVs, removes special-purpose
// addresses, merges neighbouring ranges of one country and writes the
// compact file that geo embeds.
//
// Run it through go generate in httpd/geo. Without -v4 and -v6 it fetches the
// npm package with `npm pack` into a temporary directory; with them it reads
// the given CSVs and needs -version (and -date unless the version ends in
// the YYYYMMDDHH stamp the npm package uses).
package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

const npmPackage = "@ip-location-db/geo-whois-asn-country"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	v4Path := flag.String("v4", "", "IPv4 CSV (start,end,country); fetched with npm pack when empty")
	v6Path := flag.String("v6", "", "IPv6 CSV (start,end,country); fetched with npm pack when empty")
	version := flag.String("version", "", "version of the CSVs; read from the npm package when fetched")
	date := flag.String("date", "", "date of the CSVs, YYYY-MM-DD; derived from a version ending in YYYYMMDDHH when empty")
	out := flag.String("out", "table.bin.gz", "file to write")
	flag.Parse()

	if (*v4Path == "") != (*v6Path == "") {
		return errors.New("give both -v4 and -v6, or neither to fetch them")
	}
	if *v4Path == "" {
		dir, err := os.MkdirTemp("", "geogen")
		if err != nil {
			return fmt.Errorf("temporary directory: %w", err)
		}
		defer os.RemoveAll(dir)
		v, err := fetch(dir)
		if err != nil {
			return err
		}
		*version = v
		*v4Path = filepath.Join(dir, "package", "geo-whois-asn-country-ipv4.csv")
		*v6Path = filepath.Join(dir, "package", "geo-whois-asn-country-ipv6.csv")
	}
	if *version == "" {
		return errors.New("-version is required with -v4 and -v6")
	}
	if *date == "" {
		d, err := dateOf(*version)
		if err != nil {
			return err
		}
		*date = d
	}

	v4, err := readCSV(*v4Path, true)
	if err != nil {
		return err
	}
	v6, err := readCSV(*v6Path, false)
	if err != nil {
		return err
	}
	f, err := build(v4, v6)
	if err != nil {
		return err
	}
	f.Version, f.Date = *version, *date
	data, err := f.Marshal()
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, data, 0o644); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	fmt.Fprintf(os.Stderr, "gen: %s %s: %d+%d CSV rows -> %d IPv4 and %d IPv6 ranges, %d countries, %d bytes\n",
		f.Version, f.Date, len(v4), len(v6), len(f.V4Start), len(f.V6High), len(f.Codes), len(data))
	return nil
}

// fetch runs npm pack in dir, unpacks the tarball there and returns the
// package's version.
func fetch(dir string) (string, error) {
	cmd := exec.Command("npm", "pack", "--silent", npmPackage)
	cmd.Dir, cmd.Stderr = dir, os.Stderr
	name, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("npm pack %s: %w", npmPackage, err)
	}
	tgz := filepath.Join(dir, strings.TrimSpace(string(name)))
	if err := untar(tgz, dir); err != nil {
		return "", fmt.Errorf("unpack %s: %w", tgz, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "package", "package.json"))
	if err != nil {
		return "", fmt.Errorf("read package.json: %w", err)
	}
	var meta struct{ Version string }
	if err := json.Unmarshal(raw, &meta); err != nil || meta.Version == "" {
		return "", fmt.Errorf("package.json has no version: %v", err)
	}
	return meta.Version, nil
}

// untar extracts the regular files of a gzipped tarball under dir, refusing
// names that would land outside it.
func untar(tgz, dir string) error {
	file, err := os.Open(tgz)
	if err != nil {
		return err
	}
	defer file.Close()
	zr, err := gzip.NewReader(file)
	if err != nil {
		return err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if !filepath.IsLocal(h.Name) {
			return fmt.Errorf("tarball entry %q leaves the directory", h.Name)
		}
		dst := filepath.Join(dir, h.Name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := writeFrom(dst, tr); err != nil {
			return err
		}
	}
}

func writeFrom(dst string, r io.Reader) error {
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

var stamp = regexp.MustCompile(`\.(\d{4})(\d{2})(\d{2})\d{2}$`)

// dateOf reads the date out of an npm version such as 2.3.2026061719.
func dateOf(version string) (string, error) {
	m := stamp.FindStringSubmatch(version)
	if m == nil {
		return "", fmt.Errorf("version %q carries no YYYYMMDDHH stamp; give -date", version)
	}
	return m[1] + "-" + m[2] + "-" + m[3], nil
}

// readCSV reads start,end,country rows of one address family.
func readCSV(path string, v4 bool) ([]span, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read CSV: %w", err)
	}
	defer file.Close()
	var spans []span
	sc := bufio.NewScanner(file)
	for line := 1; sc.Scan(); line++ {
		s, err := parseRow(sc.Text(), v4)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		spans = append(spans, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return spans, nil
}

func parseRow(row string, v4 bool) (span, error) {
	fields := strings.Split(strings.TrimSpace(row), ",")
	if len(fields) != 3 {
		return span{}, fmt.Errorf("want start,end,country, got %q", row)
	}
	start, err1 := netip.ParseAddr(fields[0])
	end, err2 := netip.ParseAddr(fields[1])
	if err := errors.Join(err1, err2); err != nil {
		return span{}, err
	}
	if start.Is4() != v4 || end.Is4() != v4 || start.Zone() != "" || end.Zone() != "" {
		return span{}, fmt.Errorf("row %q is not of the file's address family", row)
	}
	if end.Less(start) {
		return span{}, fmt.Errorf("row %q ends before it starts", row)
	}
	code := fields[2]
	if len(code) != 2 || code < "AA" || code > "ZZ" || code[1] < 'A' || code[1] > 'Z' {
		return span{}, fmt.Errorf("country %q is not two capital letters", code)
	}
	return span{from: toU128(start), to: toU128(end), code: code}, nil
}
