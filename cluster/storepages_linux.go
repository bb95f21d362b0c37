//go:build linux

package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dropFileMappings advises the kernel that the process no longer needs
// the resident pages of its read-only shared mappings of the file at path
// (MADV_DONTNEED). For such a mapping that only takes the pages out of the
// process: nothing was written through it, and the next access faults the
// page back in from the page cache. Other mappings of the file are left
// alone (dropping a private mapping's pages would lose what was written to
// them). The caller keeps the file's mappings from changing meanwhile.
func dropFileMappings(path string) error {
	ranges, err := fileMappings(path)
	if err != nil {
		return err
	}
	for _, r := range ranges {
		// The raw call takes the range as numbers: no Go slice is made over
		// memory the runtime does not manage.
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, r.start, r.end-r.start, syscall.MADV_DONTNEED); errno != 0 {
			return fmt.Errorf("madvise %s mapped at %#x-%#x: %w", path, r.start, r.end, errno)
		}
	}
	return nil
}

// addrRange is one mapping's addresses, [start, end).
type addrRange struct{ start, end uintptr }

// fileMappings returns the read-only shared mappings of the file at path
// that /proc/self/maps lists. A line is the file's when it names the same
// device and inode as stat does, or the same path (on overlay file systems
// the two may report different devices). None when the file does not
// exist.
func fileMappings(path string) ([]addrRange, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find the mappings of %s: %w", path, err)
	}
	var dev, ino uint64
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		dev, ino = sys.Dev, sys.Ino
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("find the mappings of %s: %w", path, err)
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil, fmt.Errorf("find the mappings of %s: %w", path, err)
	}
	var found []addrRange
	for _, line := range strings.Split(string(maps), "\n") {
		m, ok := parseMapsLine(line)
		if !ok || m.perms[1] == 'w' || m.perms[3] != 's' {
			continue
		}
		sameFile := m.ino == ino && ino != 0 && m.major == devMajor(dev) && m.minor == devMinor(dev)
		if sameFile || m.path == abs {
			found = append(found, m.addrRange)
		}
	}
	return found, nil
}

// mapsLine is one line of /proc/<pid>/maps:
// "start-end perms offset major:minor inode   path".
type mapsLine struct {
	addrRange
	perms        string // four letters: r/-, w/-, x/-, s(hared)/p(rivate)
	major, minor uint64
	ino          uint64
	path         string // "" for an anonymous mapping
}

func parseMapsLine(line string) (mapsLine, bool) {
	var m mapsLine
	f := strings.SplitN(line, " ", 6)
	if len(f) < 5 || len(f[1]) != 4 {
		return m, false
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return m, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	major, minor, ok := strings.Cut(f[3], ":")
	if !ok {
		return m, false
	}
	maj, err3 := strconv.ParseUint(major, 16, 64)
	mnr, err4 := strconv.ParseUint(minor, 16, 64)
	ino, err5 := strconv.ParseUint(f[4], 10, 64)
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil || end <= start {
		return m, false
	}
	m.addrRange = addrRange{start: uintptr(start), end: uintptr(end)}
	m.perms, m.major, m.minor, m.ino = f[1], maj, mnr, ino
	if len(f) == 6 {
		m.path = strings.TrimLeft(f[5], " ")
	}
	return m, true
}

// devMajor and devMinor split a device number as stat reports it (glibc's
// encoding: the minor's low 8 bits, then 12 bits of major, then the rest
// of each), the way /proc/<pid>/maps prints it.
func devMajor(dev uint64) uint64 { return (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff) }
func devMinor(dev uint64) uint64 { return dev&0xff | (dev>>12)&^uint64(0xff) }
