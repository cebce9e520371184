/** Where the compiled Lua module is written (src/shared/store/lua-sources.ts). */
export declare const TARGET: URL;
/** The module's text, from lua/*.lua as they are now. */
export declare function luaModule(): string;
