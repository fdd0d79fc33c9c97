package redisstore

// LuaDate exposes the scripts' calendar to the external tests.
const LuaDate = luaDate

// DecisionScripts exposes the hashes of the scripts Preload loads.
var DecisionScripts = []string{decideScript.Hash(), peekScript.Hash()}
