import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// Relative asset paths: the built page works wherever it is served from (the demo's root,
// a sub-path of an app, a CDN folder).
export default defineConfig({
  root: import.meta.dirname,
  base: './',
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true },
});
