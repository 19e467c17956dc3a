package sealed

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
)

// LinkSecret is the 32-byte secret of a share link that travels only in the
// URL fragment (FORMAT.md §9), as 43 characters of base64url without padding.
type LinkSecret [32]byte

// LinkKey is the key a share link's index is sealed under (by way of
// IndexKey). For a link without a passphrase it is the link secret itself;
// for a passphrase-protected link it is random and kept in wrapped_secret.
type LinkKey [32]byte

// NewLinkSecret returns a new random link secret.
func NewLinkSecret() LinkSecret { return LinkSecret(randomKey()) }

// Fragment returns the secret as the URL fragment carries it.
func (s LinkSecret) Fragment() string { return base64.RawURLEncoding.EncodeToString(s[:]) }

// ParseFragment reads a URL fragment (without the "#") as a link secret.
func ParseFragment(f string) (LinkSecret, error) {
	// Go's decoder skips carriage returns and newlines; a fragment is
	// exactly its 43 characters, so the length is checked on the text.
	b, err := base64.RawURLEncoding.Strict().DecodeString(f)
	if err != nil || len(f) != 43 || len(b) != 32 {
		return LinkSecret{}, malformed("link fragment is not 43 characters of base64url")
	}
	return LinkSecret(b), nil
}

// Key is the link key of a link without a passphrase: the secret itself.
func (s LinkSecret) Key() LinkKey { return LinkKey(s) }

// IndexKey is the blob key of the link's index: HKDF-SHA256(link key, no
// salt, "sealbox/v1/share:index").
func (k LinkKey) IndexKey() BlobKey { return BlobKey(derive(k[:], nil, infoShareIndex)) }

// PBKDF2 iteration counts of a wrapped secret (FORMAT.md §9.2): at least
// MinPBKDF2Iterations to create one, at most maxPBKDF2Iterations to open one.
const (
	MinPBKDF2Iterations = 600_000
	maxPBKDF2Iterations = 10_000_000
	kdfPBKDF2SHA256     = 1
	// WrappedSecretSize is the size of every version-1 wrapped secret.
	WrappedSecretSize   = wrappedSecretHeader + nonceSize + KeySize + tagSize
	wrappedSecretHeader = 26
)

var wrappedSecretMagic = [4]byte{'S', 'B', 'X', 'P'}

// WrapLinkKey makes the wrapped_secret of a passphrase-protected link: a new
// random link key sealed under a key derived from passphrase (PBKDF2-SHA256,
// iterations at least 600,000) and the link secret. It returns the link key
// and the wrapped_secret bytes (sent base64 in IssueShareRequest).
func WrapLinkKey(s LinkSecret, passphrase string, iterations uint32) (LinkKey, []byte, error) {
	k := LinkKey(randomKey())
	w, err := wrapLinkKey(s, passphrase, iterations, randomSalt(), randomNonce(), k)
	return k, w, err
}

func wrapLinkKey(s LinkSecret, passphrase string, iter uint32, salt [16]byte, nonce [nonceSize]byte, k LinkKey) ([]byte, error) {
	if iter < MinPBKDF2Iterations && !allowWeak {
		return nil, ErrWeakParams
	}
	if iter < 1 || iter > maxPBKDF2Iterations {
		return nil, malformed("PBKDF2 iterations %d out of range", iter)
	}
	b := make([]byte, 0, WrappedSecretSize)
	b = append(b, wrappedSecretMagic[:]...)
	b = append(b, 1, kdfPBKDF2SHA256)
	b = binary.BigEndian.AppendUint32(b, iter)
	b = append(b, salt[:]...)
	hdr := b[:wrappedSecretHeader:wrappedSecretHeader]
	b = append(b, nonce[:]...)
	return newGCM(passphraseKEK(s, passphrase, salt[:], iter)).Seal(b, nonce[:], k[:], hdr), nil
}

func passphraseKEK(s LinkSecret, passphrase string, salt []byte, iter uint32) [KeySize]byte {
	p, err := pbkdf2.Key(sha256.New, passphrase, salt, int(iter), KeySize)
	if err != nil {
		panic("sealed: pbkdf2: " + err.Error()) // only for lengths it cannot give
	}
	return derive(p, s[:], infoShareKEK)
}

// WrappedSecretInfo is what a wrapped secret's header says.
type WrappedSecretInfo struct {
	Iterations uint32
	Salt       [16]byte
}

// ParseWrappedSecret checks a wrapped secret's layout and returns its
// header: the parser of the untrusted bytes GET /s/{id}/wrapped-secret
// answers.
func ParseWrappedSecret(b []byte) (WrappedSecretInfo, error) {
	if err := checkHeader(b, wrappedSecretMagic, "wrapped secret"); err != nil {
		return WrappedSecretInfo{}, err
	}
	if len(b) != WrappedSecretSize {
		return WrappedSecretInfo{}, malformed("wrapped secret is %d bytes, version 1 has %d", len(b), WrappedSecretSize)
	}
	if b[5] != kdfPBKDF2SHA256 {
		return WrappedSecretInfo{}, malformed("wrapped secret KDF %d unknown", b[5])
	}
	info := WrappedSecretInfo{Iterations: binary.BigEndian.Uint32(b[6:10]), Salt: [16]byte(b[10:26])}
	if info.Iterations < 1 || info.Iterations > maxPBKDF2Iterations {
		return WrappedSecretInfo{}, malformed("PBKDF2 iterations %d out of range", info.Iterations)
	}
	return info, nil
}

// OpenWrappedSecret returns the link key of a passphrase-protected link.
func OpenWrappedSecret(b []byte, s LinkSecret, passphrase string) (LinkKey, error) {
	info, err := ParseWrappedSecret(b)
	if err != nil {
		return LinkKey{}, err
	}
	kek := passphraseKEK(s, passphrase, info.Salt[:], info.Iterations)
	pt, err := newGCM(kek).Open(nil, b[26:26+nonceSize], b[26+nonceSize:], b[:wrappedSecretHeader])
	if err != nil {
		return LinkKey{}, ErrAuth
	}
	return LinkKey(pt), nil
}

// ShareIndex is the plaintext of a link's metadata blob (FORMAT.md §9.3): the
// assets the link shows, each with its key and its metadata blob.
type ShareIndex struct {
	Title string      `json:"title,omitempty"`
	Items []ShareItem `json:"items"`
}

// ShareItem is one asset of a share index.
type ShareItem struct {
	AssetKey     AssetKey `json:"-"`
	FileID       string   `json:"file_id"`
	MetadataHash string   `json:"metadata_hash"`
}

type shareItemJSON struct {
	AssetKey     string `json:"asset_key"`
	FileID       string `json:"file_id"`
	MetadataHash string `json:"metadata_hash"`
}

type shareIndexJSON struct {
	Items []shareItemJSON `json:"items"`
	Title string          `json:"title,omitempty"`
	V     int             `json:"v"`
}

// EncodeShareIndex returns the padded plaintext of idx.
func EncodeShareIndex(idx *ShareIndex) ([]byte, error) {
	j := shareIndexJSON{Title: idx.Title, V: 1, Items: []shareItemJSON{}}
	for _, it := range idx.Items {
		if !canonicalUUID(it.FileID) || !isHash(it.MetadataHash) {
			return nil, malformed("share item file_id or metadata_hash malformed")
		}
		j.Items = append(j.Items, shareItemJSON{
			AssetKey:     base64.RawURLEncoding.EncodeToString(it.AssetKey[:]),
			FileID:       it.FileID,
			MetadataHash: it.MetadataHash,
		})
	}
	return encodeDocument(j)
}

// ParseShareIndex reads the padded plaintext of a share index. Keys it does
// not know are ignored.
func ParseShareIndex(plain []byte) (*ShareIndex, error) {
	members, err := decodeDocument(plain)
	if err != nil {
		return nil, err
	}
	if err := version(members, "share index"); err != nil {
		return nil, err
	}
	// null is refused in what a reader reads, as in metadata (§6.1): a null
	// title would read as none. A null item, or a null member of one, fails
	// the item's checks below; keys a reader does not know are ignored,
	// whatever they hold.
	if raw, ok := members["title"]; ok && hasNull(raw) {
		return nil, malformed("share index title is null")
	}
	var j struct {
		Items []shareItemJSON `json:"items"`
		Title string          `json:"title"`
	}
	if err := json.Unmarshal(plain, &j); err != nil || j.Items == nil {
		return nil, malformed("share index items missing or of the wrong type")
	}
	idx := &ShareIndex{Title: j.Title, Items: make([]ShareItem, 0, len(j.Items))}
	for _, it := range j.Items {
		k, err := base64.RawURLEncoding.Strict().DecodeString(it.AssetKey)
		if err != nil || len(it.AssetKey) != 43 || len(k) != KeySize || !canonicalUUID(it.FileID) || !isHash(it.MetadataHash) {
			return nil, malformed("share index item malformed")
		}
		idx.Items = append(idx.Items, ShareItem{AssetKey: AssetKey(k), FileID: it.FileID, MetadataHash: it.MetadataHash})
	}
	return idx, nil
}

// SealShareIndex seals idx as the link's metadata blob, under k's index key.
func SealShareIndex(k LinkKey, idx *ShareIndex) ([]byte, error) {
	plain, err := EncodeShareIndex(idx)
	if err != nil {
		return nil, err
	}
	return sealBytes(k.IndexKey(), plain, randomSalt()), nil
}

// OpenShareIndex opens a link's metadata blob.
func OpenShareIndex(k LinkKey, sealed []byte) (*ShareIndex, error) {
	plain, err := openBytes(k.IndexKey(), sealed, MaxDocument)
	if err != nil {
		return nil, err
	}
	return ParseShareIndex(plain)
}
