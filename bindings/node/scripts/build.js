'use strict';
// `npm install`: builds the native module from source with cargo and copies
// it to litelane.node. LITELANE_NODE_DEBUG=1 builds without --release.
const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const root = path.join(__dirname, '..');
const release = !process.env.LITELANE_NODE_DEBUG;
const targetDir = process.env.CARGO_TARGET_DIR || path.join(root, '..', '..', 'target', 'node');
const jobs = process.env.LITELANE_NODE_JOBS || '2';
const args = ['build', '--manifest-path', path.join(root, 'Cargo.toml'), '-j', jobs];
if (release) args.push('--release');
const started = Date.now();
execFileSync('cargo', args, { stdio: 'inherit', env: { ...process.env, CARGO_TARGET_DIR: targetDir } });
const lib = { linux: 'liblitelane_node.so', darwin: 'liblitelane_node.dylib', win32: 'litelane_node.dll' }[process.platform];
if (!lib) throw new Error(`unsupported platform ${process.platform}`);
const built = path.join(targetDir, release ? 'release' : 'debug', lib);
fs.copyFileSync(built, path.join(root, 'litelane.node'));
console.log(`litelane.node built in ${((Date.now() - started) / 1000).toFixed(1)} s`);
