package server

import (
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// FuzzParseTilePath: any path parses to a tile of height 8 whose canonical
// tlog-tiles spelling is the path itself, or is refused; nothing panics.
func FuzzParseTilePath(f *testing.F) {
	for _, seed := range []string{"0/000", "0/x001/234", "1/000.p/7", "entries/000", "entries/x001/000.p/255", "63/000",
		"0/000.p/256", "0/000.p/0", "0/0", "-1/000", "data/000", "entries/001.p/", "", "/", "0/x000/001", "0//000",
		"entries/x004/x611/x686/x018/x427/x387/904.p/1", "0/x036/x028/x797/x018/x963/968"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, path string) {
		tile, ok := parseTilePath(path)
		if !ok {
			return
		}
		if tile.H != tileHeight || tile.W < 1 || tile.W > 1<<tileHeight || tile.L < -1 || tile.L > 63 {
			t.Fatalf("%q parsed to %+v", path, tile)
		}
		if back := tilePath(tile); back != path {
			t.Fatalf("%q parsed to %+v, whose path is %q", path, tile, back)
		}
		if _, err := tlog.ParseTilePath(tile.Path()); err != nil {
			t.Fatalf("%q: %v", path, err)
		}
	})
}
