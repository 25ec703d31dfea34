// The page tools (everything except the tab tools of tools/core.js).

import computer from './computer.js';
import readPage from './read_page.js';
import find from './find.js';
import formInput from './form_input.js';
import getPageText from './get_page_text.js';
import consoleNetwork from './console_network.js';
import javascriptTool from './javascript_tool.js';
import resizeWindow from './resize_window.js';
import updatePlan from './update_plan.js';
import turnAnswer from './turn_answer.js';
import devUtils from './dev_utils.js';
import permissionsCheck from './permissions_check.js';
import gifCreator from './gif_creator.js';
import uploadImage from './upload_image.js';
import shortcuts from './shortcuts.js';

export default [
  computer,
  readPage,
  find,
  formInput,
  getPageText,
  ...consoleNetwork,
  javascriptTool,
  resizeWindow,
  updatePlan,
  ...turnAnswer,
  devUtils,
  permissionsCheck,
  gifCreator,
  uploadImage,
  ...shortcuts,
];
