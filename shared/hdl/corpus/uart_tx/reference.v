// Reference UART transmitter: the whole frame is loaded into a shift register and shifted out,
// with a down-counter for the cycles of each bit and a count of the bits left.
module uart_tx #(
    parameter CLKS_PER_BIT = 4
) (
    input  wire       clk,
    input  wire       rst,
    input  wire       start,
    input  wire [7:0] data,
    output wire       tx,
    output wire       busy
);
    reg [9:0] frame;      // frame[0] is on the line; all ones when idle
    reg [3:0] bits_left;  // bits still to send after the current one
    reg [7:0] wait_cnt;
    reg       active;

    assign tx   = frame[0];
    assign busy = active;

    always @(posedge clk) begin
        if (rst) begin
            active <= 1'b0;
            frame  <= 10'h3FF;
        end else if (!active) begin
            if (start) begin
                frame     <= {1'b1, data, 1'b0};
                bits_left <= 4'd9;
                wait_cnt  <= CLKS_PER_BIT - 1;
                active    <= 1'b1;
            end
        end else if (wait_cnt != 8'd0) begin
            wait_cnt <= wait_cnt - 8'd1;
        end else if (bits_left != 4'd0) begin
            frame     <= {1'b1, frame[9:1]};
            bits_left <= bits_left - 4'd1;
            wait_cnt  <= CLKS_PER_BIT - 1;
        end else begin
            active <= 1'b0;
        end
    end
endmodule
