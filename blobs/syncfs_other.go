//go:build !linux

package blobs

import "errors"

// haveSyncFS is false: without syncfs(2), PutSmall puts its blobs one by
// one, each with its own fsyncs.
const haveSyncFS = false

func syncFS(string) error { return errors.ErrUnsupported }
