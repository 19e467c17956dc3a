package sealed

// Tests may create escrows and wrapped secrets with small Argon2id and PBKDF2
// parameters, so that they stay fast; the package's floors hold everywhere
// else (TestWeakParamsRefused turns this off again to check them).
func init() { allowWeak = true }
