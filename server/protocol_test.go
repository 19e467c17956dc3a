package server_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// protocolCitation matches a citation of the protocol notes and the section
// numbers that follow it: "PROTOCOL.md §7", "PROTOCOL.md §1 and §5", and in
// Markdown "`server/PROTOCOL.md` §17".
var protocolCitation = regexp.MustCompile("PROTOCOL\\.md`?((?:(?:,? and |, | )§\\d+)+)")

// protocolSection matches one section number inside a citation.
var protocolSection = regexp.MustCompile(`§(\d+)`)

// protocolHeading matches a section heading of server/PROTOCOL.md.
var protocolHeading = regexp.MustCompile(`(?m)^## §(\d+) (.+)$`)

// protocolFixedTitles are the sections whose numbers and topics are fixed:
// code, tests and other documents cite them by number.
var protocolFixedTitles = []string{
	"Names and formats",
	"Request handling",
	"Accounts and sessions",
	"Second factor",
	"Global sign-out proof",
	"Escrow and device directory",
	"Enrollment relay",
	"Share links",
	"Uploads",
	"Albums",
	"Version probe",
}

// protocolSections returns the section titles of server/PROTOCOL.md by number.
func protocolSections(t *testing.T) map[int]string {
	t.Helper()
	doc, err := os.ReadFile("PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := map[int]string{}
	for _, m := range protocolHeading.FindAllStringSubmatch(string(doc), -1) {
		n, _ := strconv.Atoi(m[1])
		if _, dup := sections[n]; dup {
			t.Fatalf("PROTOCOL.md: two headings for §%d", n)
		}
		sections[n] = m[2]
	}
	return sections
}

// TestProtocolSections: server/PROTOCOL.md numbers its sections from §0
// without a gap, and §0 to §10 keep the numbers and topics others cite.
func TestProtocolSections(t *testing.T) {
	sections := protocolSections(t)
	for n := range len(sections) {
		if _, ok := sections[n]; !ok {
			t.Fatalf("PROTOCOL.md has %d sections but no §%d", len(sections), n)
		}
	}
	for n, want := range protocolFixedTitles {
		if got := sections[n]; !strings.HasPrefix(got, want) {
			t.Errorf("PROTOCOL.md §%d: got title %q, want one starting %q", n, got, want)
		}
	}
}

// TestProtocolCitations: every citation "PROTOCOL.md §N" in the module's Go
// files, documents and test data names a section server/PROTOCOL.md has, and
// no Go file cites the outside document the notes replace.
func TestProtocolCitations(t *testing.T) {
	sections := protocolSections(t)
	outside := "ADDEN" + "DUM" // spelled in two so this file does not match itself
	cited := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".go", ".md", ".yaml", ".json":
		default:
			return nil
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if filepath.Ext(path) == ".go" && strings.Contains(string(text), outside) {
			t.Errorf("%s mentions %s: cite server/PROTOCOL.md §N instead", path, outside)
		}
		for _, m := range protocolCitation.FindAllStringSubmatch(string(text), -1) {
			for _, s := range protocolSection.FindAllStringSubmatch(m[1], -1) {
				n, _ := strconv.Atoi(s[1])
				if _, ok := sections[n]; !ok {
					t.Errorf("%s cites PROTOCOL.md §%d, which has no heading \"## §%d\"", path, n, n)
				}
				cited++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cited == 0 {
		t.Fatal("no citation of PROTOCOL.md found: the scan looked in the wrong place")
	}
}
