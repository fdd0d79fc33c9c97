package redisstore

// LuaDate exposes the scripts' calendar to the external tests.
const LuaDate = luaDate
