/** `body` with every run of four or more digits (an OTP code) replaced by as many `*`. */
export const maskCodes = (body: string): string => body.replace(/\d{4,}/g, (digits) => '*'.repeat(digits.length));
