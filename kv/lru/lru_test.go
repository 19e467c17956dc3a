package lru

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// order lists l's keys from the least recently used.
func order(l *List[string, int]) []string {
	var keys []string
	for e := l.oldest; e != nil; e = e.newer {
		keys = append(keys, e.key)
	}
	return keys
}

func TestList(t *testing.T) {
	type step struct {
		op    string // put, use, get, remove
		key   string
		value int
		// want: the value and presence the op returns (put: none), then
		// the order from the oldest key.
		wantValue int
		wantOK    bool
		wantOrder []string
	}
	steps := []step{
		{op: "get", key: "a", wantOrder: nil},
		{op: "use", key: "a", wantOrder: nil},
		{op: "remove", key: "a", wantOrder: nil},
		{op: "put", key: "a", value: 1, wantOrder: []string{"a"}},
		{op: "put", key: "b", value: 2, wantOrder: []string{"a", "b"}},
		{op: "put", key: "c", value: 3, wantOrder: []string{"a", "b", "c"}},
		{op: "get", key: "a", wantValue: 1, wantOK: true, wantOrder: []string{"a", "b", "c"}},
		{op: "use", key: "a", wantValue: 1, wantOK: true, wantOrder: []string{"b", "c", "a"}},
		{op: "use", key: "a", wantValue: 1, wantOK: true, wantOrder: []string{"b", "c", "a"}},
		{op: "put", key: "c", value: 30, wantOrder: []string{"b", "a", "c"}},
		{op: "get", key: "c", wantValue: 30, wantOK: true, wantOrder: []string{"b", "a", "c"}},
		{op: "remove", key: "a", wantValue: 1, wantOK: true, wantOrder: []string{"b", "c"}},
		{op: "remove", key: "b", wantValue: 2, wantOK: true, wantOrder: []string{"c"}},
		{op: "remove", key: "c", wantValue: 30, wantOK: true, wantOrder: nil},
		{op: "put", key: "a", value: 4, wantOrder: []string{"a"}},
	}
	var l List[string, int]
	for i, s := range steps {
		var v int
		var ok bool
		switch s.op {
		case "put":
			l.Put(s.key, s.value)
		case "use":
			v, ok = l.Use(s.key)
		case "get":
			v, ok = l.Get(s.key)
		case "remove":
			v, ok = l.Remove(s.key)
		}
		if v != s.wantValue || ok != s.wantOK {
			t.Fatalf("step %d: %s(%s) = %d, %v; want %d, %v", i, s.op, s.key, v, ok, s.wantValue, s.wantOK)
		}
		if got := order(&l); !slices.Equal(got, s.wantOrder) {
			t.Fatalf("step %d: %s(%s): order %v, want %v", i, s.op, s.key, got, s.wantOrder)
		}
		if l.Len() != len(s.wantOrder) {
			t.Fatalf("step %d: Len %d, want %d", i, l.Len(), len(s.wantOrder))
		}
		k, _, ok := l.Oldest()
		if ok != (len(s.wantOrder) > 0) || ok && k != s.wantOrder[0] {
			t.Fatalf("step %d: Oldest = %q, %v; want the first of %v", i, k, ok, s.wantOrder)
		}
	}
}

// TestListEvictsLeastRecentlyUsed: a table bounded by removing the oldest
// key before an insert beyond its size forgets keys in the order of their
// last use.
func TestListEvictsLeastRecentlyUsed(t *testing.T) {
	var l List[int, int]
	const size = 3
	var evicted []int
	for i := range 10 {
		if i == 5 {
			l.Use(3) // now used after 4
		}
		if l.Len() == size {
			k, _, _ := l.Oldest()
			l.Remove(k)
			evicted = append(evicted, k)
		}
		l.Put(i, i*i)
	}
	if want := []int{0, 1, 2, 4, 3, 5, 6}; !slices.Equal(evicted, want) {
		t.Errorf("evicted %v, want %v", evicted, want)
	}
	for _, k := range []int{7, 8, 9} {
		if v, ok := l.Get(k); !ok || v != k*k {
			t.Errorf("Get(%d) = %d, %v; want %d, true", k, v, ok, k*k)
		}
	}
}

// TestListMatchesAModel runs random operations on a List and on a plain
// slice in use order, and checks after each that the links, walked both
// ways, and the map hold exactly the model's keys in its order.
func TestListMatchesAModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var l List[int, int]
	var model []int // keys, least recently used first
	touch := func(k int) {
		model = slices.DeleteFunc(model, func(m int) bool { return m == k })
		model = append(model, k)
	}
	for i := range 100_000 {
		k := r.IntN(50)
		switch r.IntN(4) {
		case 0:
			l.Put(k, k)
			touch(k)
		case 1:
			if _, ok := l.Use(k); ok {
				touch(k)
			}
		case 2:
			l.Remove(k)
			model = slices.DeleteFunc(model, func(m int) bool { return m == k })
		case 3:
			if key, _, ok := l.Oldest(); ok {
				l.Remove(key)
				model = model[1:]
			}
		}
		var forward, backward []int
		for e := l.oldest; e != nil; e = e.newer {
			forward = append(forward, e.key)
			if l.entries[e.key] != e {
				t.Fatalf("op %d: the map and the links disagree at %d", i, e.key)
			}
		}
		for e := l.newest; e != nil; e = e.older {
			backward = append(backward, e.key)
		}
		slices.Reverse(backward)
		if !slices.Equal(forward, model) || !slices.Equal(backward, model) || l.Len() != len(model) {
			t.Fatalf("op %d: order %v (backward %v, Len %d), want %v", i, forward, backward, l.Len(), model)
		}
	}
}
