package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// sizeUnits are the suffixes a size flag accepts: binary (KiB, MiB, ...) and
// decimal (KB, MB, ...) multiples of bytes.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"B", 1},
}

// ParseSize reads a byte size: a whole number with an optional unit, as in
// "4096", "64KiB" or "16GiB".
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid size %q: want a whole number of bytes with an optional unit (64KiB, 16GiB)", s)
	}
	if n > 0 && mult > (1<<63-1)/n {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return n * mult, nil
}

// sizeFlag is a pflag.Value holding a byte size.
type sizeFlag struct{ n *int64 }

// String writes the size as --help shows it and ParseSize reads it back:
// in the largest binary unit that divides it ("16GiB"), else in bytes.
func (f sizeFlag) String() string {
	n := *f.n
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

func (f sizeFlag) Type() string { return "size" }

func (f sizeFlag) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*f.n = n
	return nil
}

// FormatSize writes a byte count for people, in the binary units ParseSize
// reads: "512 B", "1.5 KiB", "50 GiB" (one decimal, dropped when zero).
func FormatSize(n int64) string {
	const units = "KMGTPE"
	if n < 1<<10 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v, i := float64(n)/(1<<10), 0
	for v >= 1<<10 && i < len(units)-1 {
		v /= 1 << 10
		i++
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + " " + units[i:i+1] + "iB"
}

// daysFlag is a pflag.Value holding a positive duration written in days
// ("30d") or in Go's form ("36h").
type daysFlag struct{ d *time.Duration }

func (f daysFlag) String() string {
	if *f.d > 0 && *f.d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(*f.d/(24*time.Hour)), 10) + "d"
	}
	return f.d.String()
}
func (f daysFlag) Type() string { return "duration" }
func (f daysFlag) Set(s string) error {
	d, err := parseDays(s)
	if err != nil {
		return err
	}
	*f.d = d
	return nil
}
