// ESLint's recommended rules for the package's JavaScript (`npm run lint`,
// run by scripts/test).
'use strict';
const js = require('@eslint/js');
const globals = require('globals');

module.exports = [
	js.configs.recommended,
	{
		files: ['**/*.js'],
		languageOptions: {
			ecmaVersion: 2022,
			sourceType: 'commonjs',
			globals: { ...globals.node },
		},
	},
	{ ignores: ['node_modules/', 'target/'] },
];
