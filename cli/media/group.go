package media

import (
	"path/filepath"
	"slices"
	"strings"
)

// Group is one asset's files in a folder: its originals, the first the one
// its thumbnail and capture time come from, and the XMP sidecars that
// travel with it.
type Group struct {
	Originals []string
	Sidecars  []string
}

// GroupFiles groups the names of one folder's files into assets: a Live
// Photo (a still and a video of one base name) and a RAW+JPEG pair (a raw
// file and a still of one base name) are one asset with two originals,
// the still first; a sidecar (NAME.xmp or NAME.EXT.xmp) joins the asset of
// its base name; every other photo or video is an asset of its own. Names
// that are not media, and sidecars with no asset, are left out. The base
// name is compared without case, as cameras and phones differ in it. The
// groups are ordered by their first original.
func GroupFiles(names []string) []Group {
	byBase := map[string][]string{}
	var sidecars []string
	for _, n := range names {
		switch KindOf(n) {
		case Other:
		case Sidecar:
			sidecars = append(sidecars, n)
		default:
			b := base(n)
			byBase[b] = append(byBase[b], n)
		}
	}
	var groups []Group
	// index maps a lowercase file name, and a base name, to the group a
	// sidecar naming it joins.
	index := map[string]int{}
	for b, files := range byBase {
		slices.SortFunc(files, func(x, y string) int {
			if d := rank(x) - rank(y); d != 0 {
				return d
			}
			return strings.Compare(x, y)
		})
		for _, g := range pair(files) {
			index[b] = len(groups)
			for _, f := range g.Originals {
				index[strings.ToLower(f)] = len(groups)
			}
			groups = append(groups, g)
		}
	}
	for _, s := range sidecars {
		// NAME.EXT.xmp names its file; NAME.xmp its base.
		inner := strings.TrimSuffix(s, filepath.Ext(s))
		i, ok := index[strings.ToLower(inner)]
		if !ok {
			i, ok = index[base(inner)]
		}
		if ok {
			groups[i].Sidecars = append(groups[i].Sidecars, s)
		}
	}
	for i := range groups {
		slices.Sort(groups[i].Sidecars)
	}
	slices.SortFunc(groups, func(x, y Group) int { return strings.Compare(x.Originals[0], y.Originals[0]) })
	return groups
}

// pair makes the assets of one base name's files, sorted by rank: a still
// with one video or one raw file is one asset; anything else is an asset
// a file.
func pair(files []string) []Group {
	if len(files) == 2 {
		still, other := KindOf(files[0]), KindOf(files[1])
		if (still == Image || still == HEIC) && (other == Video || other == RAW) {
			return []Group{{Originals: files}}
		}
	}
	groups := make([]Group, len(files))
	for i, f := range files {
		groups[i] = Group{Originals: []string{f}}
	}
	return groups
}

// rank orders one base name's files: stills Go decodes, then HEIC, RAW and
// video, then by name.
func rank(name string) int {
	return [...]int{Image: 0, HEIC: 1, RAW: 2, Video: 3}[KindOf(name)]
}

func base(name string) string {
	return strings.ToLower(strings.TrimSuffix(name, filepath.Ext(name)))
}
