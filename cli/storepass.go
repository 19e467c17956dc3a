package cli

import (
	"net/url"

	"github.com/spf13/pflag"
)

// storePasswordAdvice is the warning for a password given in --store on
// the command line.
const storePasswordAdvice = "the --store URL on the command line holds a password, which every user of this machine can read (ps): leave it out of the URL and give it as PGPASSWORD, or in a PGPASSFILE, instead"

// passwordOnCommandLine reports whether --store was given on the command
// line with a password in its URL (user:password@ or ?password=). From
// SEALBOX_STORE it is not reported: a process's environment is readable by
// its own user and root only.
func passwordOnCommandLine(flags *pflag.FlagSet) bool {
	f := flags.Lookup("store")
	if f == nil || !f.Changed {
		return false
	}
	u, err := url.Parse(f.Value.String())
	if err != nil {
		return false
	}
	_, has := u.User.Password()
	return has || u.Query().Has("password")
}
