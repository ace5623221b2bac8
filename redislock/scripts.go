package redislock

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// The scripts compare the acquisition's random token before they touch the
// lock key, so a holder whose key expired and was taken can neither renew
// nor delete its successor's key.
var (
	//go:embed lua/acquire.lua
	acquireLua    string
	acquireScript = redis.NewScript(acquireLua)

	//go:embed lua/renew.lua
	renewLua    string
	renewScript = redis.NewScript(renewLua)

	//go:embed lua/release.lua
	releaseLua    string
	releaseScript = redis.NewScript(releaseLua)
)
